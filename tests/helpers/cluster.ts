// A private PostgreSQL cluster for fault tests (initdb and pg_ctl, as the `postgres` user when run as root), or a
// streaming standby of one (pg_basebackup -R), removed at teardown.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { alive } from '../../db/embedded.ts';
import { freePort } from './processes.ts';
import { waitFor } from './wait.ts';

const run = promisify(execFile);

// Debian installs each major version's server binaries here; they are not on PATH.
const DEBIAN_ROOT = '/usr/lib/postgresql';

/** The bin directory of the newest PostgreSQL server installed the Debian way. */
function binDir(): string {
  const versions = existsSync(DEBIAN_ROOT)
    ? readdirSync(DEBIAN_ROOT)
        .filter((version) => existsSync(path.join(DEBIAN_ROOT, version, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(`Private cluster: no PostgreSQL server binaries (${DEBIAN_ROOT}/<version>/bin/initdb); install postgresql`);
  }
  return path.join(DEBIAN_ROOT, versions[0]!, 'bin');
}

/** initdb refuses to run as root: as root, every server command runs as `postgres`; otherwise as ourselves. */
async function serverUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
  } catch {
    throw new Error('Private cluster: running as root needs a `postgres` user to run the server as (initdb refuses root)');
  }
}

/** Process ids whose parent is `pid`, from /proc. */
export async function childrenOf(pid: number): Promise<number[]> {
  const children: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // The command name, in parentheses, may hold spaces: the fields after it are state, then ppid.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === pid) children.push(Number(entry));
  }
  return children;
}

type StopMode = 'fast' | 'immediate';

export interface Cluster {
  readonly port: number;
  /** A superuser URL for `database` (default `postgres`); trust authentication on 127.0.0.1. */
  url(database?: string): string;
  /** Starts the server and waits until it accepts connections. */
  start(): Promise<void>;
  /** fast: disconnects clients, checkpoints, exits; immediate: exits at once, crash recovery at the next start. */
  stop(mode?: StopMode): Promise<void>;
  /** What `pg_ctl restart -m <mode>` does: stop, then start. */
  restart(mode?: StopMode): Promise<void>;
  /** The running postmaster's process id (from postmaster.pid). */
  postmasterPid(): Promise<number>;
  /** Sends `signal` to the postmaster: SIGKILL, SIGSTOP, SIGCONT. */
  signalPostmaster(signal: NodeJS.Signals): Promise<void>;
  /** The server's log so far, for failure messages. */
  log(): Promise<string>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * util-linux's runuser, by its path where Debian installs it: it is in /usr/sbin, which a login shell's PATH
 * has and a minimal one (`env -i`, some CI runners) may not.
 */
const RUNUSER = ['/usr/sbin/runuser', '/sbin/runuser'].find((file) => existsSync(file)) ?? 'runuser';

export interface ClusterOptions {
  /** Instead of initdb: a streaming standby of this cluster, copied by `pg_basebackup -R` (hot standby, read-only). */
  readonly standbyOf?: Cluster;
}

/**
 * initdb (or pg_basebackup, for a standby) and start a cluster in a new directory under /tmp (which the `postgres` user can reach, unlike a
 * checkout under /root), on a free port of the tests' range, listening on 127.0.0.1 only with its socket
 * in that directory. fsync is off: a test cluster need not survive a power cut, and it starts faster.
 * `extra` adds or overrides postgresql.conf settings, written as the file takes them (`{ autovacuum: 'off' }`).
 */
export async function startCluster(t: Teardown, extra: Record<string, string> = {}, options: ClusterOptions = {}): Promise<Cluster> {
  const bin = binDir();
  const user = await serverUser();
  const root = await mkdtemp('/tmp/pg-cluster-');
  const dataDir = path.join(root, 'data');
  const logFile = path.join(root, 'server.log');
  if (user) await chown(root, user.uid, user.gid);
  let stopped = true;
  let paused = false;

  t.teardown(async () => {
    if (paused) await signalPostmaster('SIGCONT').catch(() => {});
    if (!stopped) await pgCtl(['stop', '-m', 'immediate']).catch(() => {});
    await rm(root, { recursive: true, force: true });
  });

  async function command(file: string, args: string[]): Promise<string> {
    const [program, argv] = user ? [RUNUSER, ['-u', 'postgres', '--', path.join(bin, file), ...args]] : [path.join(bin, file), args];
    try {
      const { stdout } = await run(program, argv, { cwd: root });
      return stdout;
    } catch (error) {
      const { stderr = '', message } = error as { stderr?: string; message: string };
      const serverLog = await readFile(logFile, 'utf8').catch(() => '');
      throw new Error(`Private cluster: ${file} ${args.join(' ')} failed: ${stderr.trim() || message}\n${serverLog.slice(-2000)}`);
    }
  }

  function pgCtl(args: string[]): Promise<string> {
    return command('pg_ctl', [...args, '-D', dataDir, '-w', '-t', '60']);
  }

  async function postmasterPid(): Promise<number> {
    // postmaster.pid: the first line is the postmaster's process id.
    const pid = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
    if (!Number.isInteger(pid) || pid <= 0) throw new Error('Private cluster: no postmaster running');
    return pid;
  }

  async function signalPostmaster(signal: NodeJS.Signals): Promise<void> {
    const pid = await postmasterPid();
    const backends = signal === 'SIGKILL' ? await childrenOf(pid) : [];
    process.kill(pid, signal);
    if (signal === 'SIGSTOP') paused = true;
    if (signal === 'SIGCONT') paused = false;
    if (signal !== 'SIGKILL') return;
    paused = false;
    stopped = true;
    // A new postmaster refuses to start while the old one's process id is alive (even unreaped) or its
    // backends, which exit when they notice it died, still hold its shared memory.
    const gone = [pid, ...backends];
    await waitFor('the killed postmaster and its backends to end', () => gone.filter(alive), {
      until: (left) => left.length === 0,
      timeoutMs: 10_000,
      intervalMs: 20,
    });
  }

  async function start(): Promise<void> {
    // With -l, the postmaster's output goes to the file rather than to our pipes, so pg_ctl returns.
    await pgCtl(['start', '-l', logFile]);
    stopped = false;
  }

  async function stop(mode: StopMode = 'fast'): Promise<void> {
    await pgCtl(['stop', '-m', mode]);
    stopped = true;
  }

  const port = await freePort();
  if (options.standbyOf) {
    // initdb's pg_hba.conf trusts replication connections from 127.0.0.1; -R writes primary_conninfo and standby.signal.
    const source = ['-h', '127.0.0.1', '-p', String(options.standbyOf.port), '-U', 'postgres'];
    await command('pg_basebackup', ['-D', dataDir, ...source, '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync']);
  } else {
    await command('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  }
  const settings = {
    port: String(port),
    listen_addresses: "'127.0.0.1'",
    unix_socket_directories: `'${root}'`,
    fsync: 'off',
    synchronous_commit: 'off',
    full_page_writes: 'off',
    max_connections: '100',
    shared_buffers: "'32MB'",
    ...extra,
  };
  const conf = Object.entries(settings)
    .map(([name, value]) => `${name} = ${value}\n`)
    .join('');
  await writeFile(path.join(dataDir, 'postgresql.conf'), `${await readFile(path.join(dataDir, 'postgresql.conf'), 'utf8')}\n${conf}`);
  await start();

  return {
    port,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    start,
    stop,
    async restart(mode: StopMode = 'fast') {
      // pg_ctl restart has no -l: the new postmaster would write to our pipes and pg_ctl's output would
      // never end. Stop, then start, is what it does.
      await stop(mode);
      await start();
    },
    postmasterPid,
    signalPostmaster,
    log: () => readFile(logFile, 'utf8').catch(() => ''),
  };
}
