// The container image, without a Docker engine: its one build step (deploy/install.sh) run on this
// checkout, then the Dockerfile's own CMD and HEALTHCHECK run in the result, as a non-root user.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmod, copyFile, link, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { testDatabase } from '../helpers/db.ts';
import { freePort, stopProcess } from '../helpers/processes.ts';
import { NODE_FLAGS } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dockerfile = await readFile(path.join(root, 'Dockerfile'), 'utf8');

/** The JSON (exec) form of a Dockerfile instruction, e.g. CMD ["node", …]. */
function execForm(instruction: string): string[] {
  const line = dockerfile.split('\n').find((text) => text.startsWith(`${instruction} `));
  const json = line && /(\[.*\])\s*$/.exec(line)?.[1];
  if (!json) throw new Error(`No ${instruction} in exec form in the Dockerfile`);
  return JSON.parse(json) as string[];
}

/** This test's Node as a file in `dir` (a hard link, else a copy): a path the unprivileged user can execute. */
async function reachableNode(dir: string): Promise<string> {
  const node = path.join(dir, 'node');
  await link(process.execPath, node).catch(() => copyFile(process.execPath, node));
  await chmod(node, 0o755);
  return node;
}

/** The uid and gid of a system user. */
function idsOf(user: string): { uid: number; gid: number } {
  const uid = Number(spawnSync('id', ['-u', user]).stdout);
  const gid = Number(spawnSync('id', ['-g', user]).stdout);
  if (!uid || !gid) throw new Error(`No user ${user}`);
  return { uid, gid };
}

/** Runs `command` to its end; resolves with its exit code. */
function run(command: string[], options: Parameters<typeof spawn>[2]): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0]!, command.slice(1), { ...options, stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', resolve);
  });
}

t.test('the Dockerfile: a glibc Node base, a non-root user, its one build step deploy/install.sh', async (t) => {
  t.match(dockerfile, /^FROM node:24-bookworm(-slim)?$/m, 'Debian (glibc), Node 24');
  t.match(dockerfile, /^USER node$/m, 'runs as the unprivileged node user');
  t.match(dockerfile, /^RUN .*sh \/src\/deploy\/install\.sh \/app node\b/m, 'built by the script this test runs');
  t.same(execForm('CMD'), ['node', ...NODE_FLAGS, 'server.ts'], 'one process: no npm, no shell; the flags the tests give it');
  t.equal(execForm('HEALTHCHECK').join(' ').includes('/healthz'), true, 'the health check asks /healthz');
});

t.test('deploy/install.sh on this checkout: production dependencies only; the CMD serves as a non-root user', async (t) => {
  const user = idsOf('postgres');
  const dir = await mkdtemp(path.join(tmpdir(), 'image-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await chmod(dir, 0o755); // the unprivileged user reaches the app inside
  const app = path.join(dir, 'app');
  const built = spawnSync('nice', ['-n', '19', 'sh', path.join(root, 'deploy/install.sh'), app, 'postgres'], { encoding: 'utf8' });
  t.equal(built.status, 0, `the script succeeds:\n${built.stdout}\n${built.stderr}`);

  const modules = await readdir(path.join(app, 'node_modules'));
  for (const production of ['hono', 'pino', 'prom-client', 'postgres']) t.ok(modules.includes(production), `has ${production}`);
  for (const dev of ['tap', 'drizzle-kit', 'autocannon', 'knip', '@biomejs', 'fast-check', 'rate-limiter-flexible'])
    t.notOk(modules.includes(dev), `no ${dev}`);
  t.match(await readFile(path.join(app, 'node_modules/postgres/src/index.js'), 'utf8'), /poolStats/, 'the postgres.js patch is applied');
  t.equal((await stat(path.join(app, '.data'))).uid, user.uid, '.data belongs to the user the service runs as');

  const db = await testDatabase(t);
  await seedTable(db.sql, 'products', 20);
  const port = await freePort();
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: dir,
    DATABASE_URL: db.url,
    COLLECTIONS: 'demo',
    PORT: String(port),
    NODE_ENV: 'production',
  };
  const [command, ...args] = execForm('CMD');
  // Through env -u NODE_OPTIONS: tap adds its own loader, from this checkout's node_modules, to the NODE_OPTIONS
  // of every node process a test starts, and the unprivileged user may not reach this checkout (a clone in a
  // mode-700 folder); the image has no such loader either.
  // The image's Node is its own (/usr/local/bin/node). Here it is the one this test runs on, which npm brings
  // into this checkout (node_modules/.bin/node): linked beside the app, so that the unprivileged user reaches
  // it when the checkout is in a mode-700 folder.
  const node = command === 'node' ? await reachableNode(dir) : command!;
  const server: ChildProcess = spawn('env', ['-u', 'NODE_OPTIONS', node, ...args], { cwd: app, env, ...user, stdio: 'ignore' });
  t.teardown(() => stopProcess(server, { graceMs: 5000 }));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    'the server in the image to be ready',
    async () => {
      if (server.exitCode !== null) throw new Error(`exited with ${server.exitCode}`);
      return (await fetch(`${url}/readyz`).catch(() => undefined))?.status;
    },
    { until: (status) => status === 200, timeoutMs: 60_000, intervalMs: 200 },
  );
  const chunk = await fetch(`${url}/v1/products?limit=3`);
  t.equal(chunk.status, 200, 'it serves a chunk');
  t.equal(((await chunk.json()) as { products: unknown[] }).products.length, 3);
  for (const path of ['/openapi.json', '/docs']) {
    const page = await fetch(`${url}${path}`);
    t.equal(page.status, 200, `${path} is served from the production dependencies`);
    await page.arrayBuffer();
  }

  const [, ...healthcheck] = execForm('HEALTHCHECK'); // node, then its arguments
  const check = (): Promise<number | null> => run(['env', '-u', 'NODE_OPTIONS', node, ...healthcheck], { cwd: app, env, ...user });
  t.equal(await check(), 0, 'the HEALTHCHECK passes while it serves');
  t.equal(await stopProcess(server), 0, 'SIGTERM reaches the one process, which exits 0');
  t.not(await check(), 0, 'and fails once it is gone');
});
