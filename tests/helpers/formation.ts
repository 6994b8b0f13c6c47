// A pg_auto_failover formation from Debian's packages (postgresql-<version>-auto-failover, with pg_autoctl): a
// monitor, a primary and a secondary on this machine, each in a directory of its own under one temporary
// directory, run as `postgres` when run as root (PostgreSQL refuses root), on free ports of the tests' range,
// listening on 127.0.0.1; stopped and removed at teardown (docs/how-to/ha-pair.md, "With pg_auto_failover").
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, openSync, readdirSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { alive } from '../../db/embedded.ts';
import { childrenOf } from './cluster.ts';
import { freePort, stopProcess } from './processes.ts';
import { sleep, waitFor } from './wait.ts';

const run = promisify(execFile);

const DEBIAN_ROOT = '/usr/lib/postgresql';

/** The PostgreSQL whose pg_auto_failover extension is installed: its bin directory. */
function serverBin(): string {
  const versions = existsSync(DEBIAN_ROOT)
    ? readdirSync(DEBIAN_ROOT).filter((version) => existsSync(path.join(DEBIAN_ROOT, version, 'lib', 'pgautofailover.so')))
    : [];
  if (versions.length === 0 || !existsSync('/usr/bin/pg_autoctl')) {
    throw new Error('pg_auto_failover formation: install postgresql-15-auto-failover (scripts/test-packages.sh does as root)');
  }
  return path.join(DEBIAN_ROOT, versions.sort((a, b) => Number(b) - Number(a))[0]!, 'bin');
}

export interface FormationNode {
  readonly name: string;
  readonly port: number;
  /** `127.0.0.1:<port>`: how the service's URL, logs and metrics name it. */
  readonly host: string;
  readonly pgdata: string;
}

/** What the monitor says of a node: the state it reported, and the one it was assigned. */
interface NodeState {
  readonly name: string;
  readonly reported: string;
  readonly assigned: string;
}

export interface Formation {
  readonly nodes: readonly [FormationNode, FormationNode];
  /** The formation's URL for `database` (default `app`): both hosts, target_session_attrs=read-write, as `pg_autoctl show uri` gives it. */
  url(database?: string): string;
  /** A superuser URL of one node. */
  nodeUrl(node: FormationNode, database?: string): string;
  /** The monitor's view of the nodes. */
  states(): Promise<NodeState[]>;
  /** Waits until one node is `primary` and the other `secondary`, reported and assigned, and returns the primary. */
  settled(timeoutMs?: number): Promise<FormationNode>;
  /** `pg_autoctl perform failover`: the secondary is promoted, the primary demoted; resolves once it has begun. */
  performFailover(): Promise<void>;
  /** SIGKILL to a node's postmaster; pg_autoctl restarts it. Resolves once it and its backends are gone. */
  killPostmaster(node: FormationNode): Promise<void>;
  /** Every pg_autoctl log so far, for failure messages. */
  log(): Promise<string>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * Forms the formation: the monitor, then the first node (a `single`), then the second, copied from it by
 * pg_basebackup, which waits for a checkpoint: one is asked for every half second until it is done, or an
 * idle primary would keep it waiting for minutes. Resolves once the first node is `primary` and the second
 * `secondary`.
 */
export async function startFormation(t: Teardown, database = 'app'): Promise<Formation> {
  const bin = serverBin();
  const root = await mkdtemp('/tmp/pg-formation-');
  const user = process.getuid?.() === 0 ? await postgresUser() : undefined;
  if (user) await chown(root, user.uid, user.gid);
  // pg_autoctl keeps its configuration and state under XDG's directories: here, not in the user's home.
  const env = {
    PATH: `${bin}:/usr/bin:/bin`,
    HOME: root,
    XDG_CONFIG_HOME: path.join(root, 'config'),
    XDG_DATA_HOME: path.join(root, 'data'),
    XDG_RUNTIME_DIR: path.join(root, 'run'),
  };
  for (const dir of [env.XDG_CONFIG_HOME, env.XDG_DATA_HOME, env.XDG_RUNTIME_DIR]) {
    await mkdir(dir, { mode: 0o700 });
    if (user) await chown(dir, user.uid, user.gid);
  }
  const services: ChildProcess[] = [];
  const logs: string[] = [];
  const monitorPort = await freePort();
  const monitorData = path.join(root, 'monitor');
  const monitorUrl = `postgres://autoctl_node@127.0.0.1:${monitorPort}/pg_auto_failover?sslmode=disable`;
  const nodes: FormationNode[] = [];

  t.teardown(async () => {
    // The nodes first (each stops its PostgreSQL), the monitor last; one that does not stop is killed, and its
    // PostgreSQL with it.
    for (const service of services.reverse()) await stopProcess(service, { graceMs: 10_000 });
    for (const pgdata of [...nodes.map((node) => node.pgdata), monitorData]) {
      const pid = await postmasterPid(pgdata).catch(() => undefined);
      if (pid !== undefined && alive(pid)) process.kill(pid, 'SIGKILL');
    }
    await rm(root, { recursive: true, force: true });
  });

  /** A pg_autoctl command to its end. */
  async function autoctl(args: string[]): Promise<string> {
    try {
      const { stdout } = await run('/usr/bin/pg_autoctl', args, { cwd: root, env, ...(user ?? {}) });
      return stdout;
    } catch (error) {
      const { stderr = '', message } = error as { stderr?: string; message: string };
      throw new Error(`pg_autoctl ${args.join(' ')} failed: ${stderr.trim() || message}`);
    }
  }

  /** A pg_autoctl service (`create … --run`) that keeps running, its log in a file of its own. */
  function service(name: string, args: string[]): void {
    const logFile = path.join(root, `${name}.log`);
    logs.push(logFile);
    const out = openSync(logFile, 'a');
    if (user) void chown(logFile, user.uid, user.gid);
    const child = spawn('/usr/bin/pg_autoctl', args, { cwd: root, env, stdio: ['ignore', out, out], ...(user ?? {}) });
    services.push(child);
  }

  async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    client.on('error', () => {});
    await client.connect();
    try {
      return (await client.query<T>(text)).rows;
    } finally {
      await client.end().catch(() => {});
    }
  }

  async function states(): Promise<NodeState[]> {
    return query<NodeState>(
      `postgres://postgres@127.0.0.1:${monitorPort}/pg_auto_failover`,
      `select nodename as name, reportedstate::text as reported, goalstate::text as assigned from pgautofailover.node order by nodeid`,
    );
  }

  const common = ['--auth', 'trust', '--no-ssl', '--hostname', '127.0.0.1', '--pgctl', path.join(bin, 'pg_ctl')];
  service('monitor', ['create', 'monitor', '--pgdata', monitorData, '--pgport', String(monitorPort), ...common, '--run']);
  await waitFor('the monitor to accept connections', () => states().catch(() => undefined), { timeoutMs: 60_000, intervalMs: 100 });

  for (const name of ['node1', 'node2']) {
    const port = await freePort();
    const node = { name, port, host: `127.0.0.1:${port}`, pgdata: path.join(root, name) };
    nodes.push(node);
    service(name, [
      ...['create', 'postgres', '--pgdata', node.pgdata, '--pgport', String(port), '--listen', '127.0.0.1'],
      ...['--dbname', database, '--name', name, '--monitor', monitorUrl, ...common, '--run'],
    ]);
    if (name === 'node1') {
      await waitFor('node1 to be a single node', states, {
        until: (rows) => rows.some((row) => row.name === 'node1' && row.reported === 'single'),
        timeoutMs: 60_000,
        intervalMs: 100,
      });
    }
  }
  const [first, second] = nodes as [FormationNode, FormationNode];
  const nodeUrl = (node: FormationNode, name = database) => `postgres://postgres@${node.host}/${name}`;

  async function settled(timeoutMs = 60_000): Promise<FormationNode> {
    const rows = await waitFor('one primary and one secondary', states, {
      until: (rows) =>
        rows.length === 2 &&
        rows.every((row) => row.reported === row.assigned) &&
        rows.some((row) => row.reported === 'primary') &&
        rows.some((row) => row.reported === 'secondary'),
      timeoutMs,
      intervalMs: 100,
    });
    return rows[0]!.reported === 'primary' ? first : second;
  }

  // pg_basebackup of the second node waits for a checkpoint of the first: one is asked for until it is a secondary.
  let copying = true;
  const checkpoints = (async () => {
    while (copying) {
      await query(nodeUrl(first), 'checkpoint').catch(() => {});
      await sleep(500);
    }
  })();
  try {
    await settled(120_000);
  } finally {
    copying = false;
    await checkpoints;
  }

  return {
    nodes: [first, second],
    url: (name = database) => `postgres://postgres@${first.host},${second.host}/${name}?target_session_attrs=read-write`,
    nodeUrl,
    states,
    settled,
    async performFailover() {
      await autoctl(['perform', 'failover', '--pgdata', monitorData, '--formation', 'default', '--group', '0', '--wait', '0']);
    },
    async killPostmaster(node) {
      const pid = await postmasterPid(node.pgdata);
      const backends = await childrenOf(pid);
      process.kill(pid, 'SIGKILL');
      await waitFor(`${node.name}'s killed postmaster and its backends to end`, () => [pid, ...backends].filter(alive), {
        until: (left) => left.length === 0,
        timeoutMs: 10_000,
        intervalMs: 20,
      });
    },
    async log() {
      const texts = await Promise.all(
        logs.map(async (file) => `${path.basename(file)}:\n${(await readFile(file, 'utf8').catch(() => '')).slice(-3000)}`),
      );
      return texts.join('\n');
    },
  };
}

async function postgresUser(): Promise<{ uid: number; gid: number }> {
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
  } catch {
    throw new Error('pg_auto_failover formation: running as root needs a `postgres` user to run PostgreSQL as');
  }
}

/** The postmaster's process id, the first line of postmaster.pid. */
async function postmasterPid(pgdata: string): Promise<number> {
  const pid = Number((await readFile(path.join(pgdata, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`No postmaster running in ${pgdata}`);
  return pid;
}
