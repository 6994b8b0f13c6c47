// Start-up: the embedded default, and several instances starting at once against one fresh database.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { EmbeddedError, startEmbedded } from '../../db/embedded.ts';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { defaultSizes } from '../../demo/seed.ts';
import { scratchDatabase, scratchSession, serverUrl, testDatabase, withSession } from '../helpers/db.ts';
import { childEnv, freePort, stopProcess } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Sends bytes that fetch would refuse to send (a bad Host header) and returns the raw response. */
function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(text));
    let out = '';
    socket.on('data', (chunk) => (out += chunk));
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
  });
}

t.test('a bad configuration value stops start-up with one line naming it', async (t) => {
  const child = spawn(process.execPath, ['server.ts'], {
    cwd: root,
    env: childEnv({ PORT: 'eighty' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise((resolve) => child.on('exit', resolve));
  t.equal(code, 1);
  t.equal(stderr.trim(), 'Invalid PORT: expected an integer from 0 to 65535, got "eighty"');
});

t.test('the embedded PostgreSQL starts, keeps its data across restarts, and stops', async (t) => {
  const parent = await mkdtemp(path.join(tmpdir(), 'embedded-'));
  await chmod(parent, 0o755); // as root, PostgreSQL runs as its own user, which must reach the folder
  const dataDir = path.join(parent, 'pg');
  t.teardown(() => rm(path.dirname(dataDir), { recursive: true, force: true }));
  const first = await startEmbedded({ dataDir });
  await runMigrations(first.url);
  await migrateDemo(first.url);
  await withSession(first.url, (sql) => sql`insert into demo.products (name, category, price_cents) values ('kept', 'x', 1)`);
  await first.stop();
  const second = await startEmbedded({ dataDir });
  const rows = await withSession(second.url, (sql) => sql`select name from demo.products`);
  t.same(
    rows.map((r) => r.name),
    ['kept'],
    'a restart finds the data again',
  );
  await second.stop();
});

t.test('a port in use stops start-up with one line, not a stack trace', async (t) => {
  const db = await testDatabase(t);
  const taken = createServer().listen(0, '127.0.0.1');
  await once(taken, 'listening');
  t.teardown(() => taken.close());
  const port = (taken.address() as AddressInfo).port;
  const child = spawn(process.execPath, ['server.ts'], {
    cwd: root,
    env: childEnv({ PORT: String(port), DATABASE_URL: db.url, COLLECTIONS: 'demo' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = await once(child, 'exit');
  t.equal(code, 1);
  t.equal(stderr.trim(), `Could not start: port ${port} is in use: set PORT to a free one`);
});

t.test('an embedded PostgreSQL that holds the data but does not answer: one line saying which process', async (t) => {
  const parent = await mkdtemp(path.join(tmpdir(), 'embedded-'));
  await chmod(parent, 0o755);
  const dataDir = path.join(parent, 'pg');
  t.teardown(() => rm(parent, { recursive: true, force: true }));
  const holder = await startEmbedded({ dataDir });
  t.teardown(() => holder.stop());
  const pid = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  // A frozen postmaster: alive, holding the folder, answering nobody.
  process.kill(pid, 'SIGSTOP');
  t.teardown(() => process.kill(pid, 'SIGCONT'));
  const error = await startEmbedded({ dataDir }).then(
    () => undefined,
    (error: Error) => error,
  );
  t.type(error, EmbeddedError);
  t.match(
    error?.message,
    new RegExp(
      `^The embedded PostgreSQL data in ${dataDir} is held by process ${pid} \\(port \\d+, ready\\), which does not answer: stop that process, or set DATABASE_URL$`,
    ),
  );
});

t.test('an embedded PostgreSQL left running by a killed process is adopted, and stopped by its adopter', async (t) => {
  const parent = await mkdtemp(path.join(tmpdir(), 'embedded-'));
  await chmod(parent, 0o755);
  const dataDir = path.join(parent, 'pg');
  t.teardown(() => rm(parent, { recursive: true, force: true }));
  const script = `import { startEmbedded } from './db/embedded.ts'; await startEmbedded({ dataDir: ${JSON.stringify(dataDir)} }); console.log('up'); setInterval(() => {}, 1000);`;
  const owner = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await once(owner.stdout, 'data');
  const pid = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  await stopProcess(owner, { signal: 'SIGKILL' });
  t.teardown(() => {
    try {
      process.kill(pid, 'SIGQUIT');
    } catch {
      // already gone, as it should be
    }
  });
  process.kill(pid, 0); // throws if the postmaster went with its owner: it must not have, that is the point
  const lines: string[] = [];
  const adopter = await startEmbedded({ dataDir, log: (line) => lines.push(line) });
  t.match(lines.join('\n'), new RegExp(`left running by a process that is gone, on port \\d+ \\(process ${pid}\\).*adopted`));
  t.same(await withSession(adopter.url, (sql) => sql`select 1 as one`), [{ one: 1 }], 'the adopted server answers');
  await adopter.stop();
  t.throws(() => process.kill(pid, 0), 'stopping the adopter stops the orphan');
});

t.test('two instances starting at once on one fresh database migrate and seed it once', async (t) => {
  const env = { DATABASE_URL: (await scratchDatabase(t)).url };
  const ports = [await freePort(), await freePort()];
  const servers = await Promise.all(ports.map((port) => startServer(t, port, env)));
  for (const { url } of servers) {
    const res = await fetch(`${url}/v1/products?limit=1`);
    t.equal(res.status, 200, `instance at ${url} serves`);
    t.equal((await res.json()).size, defaultSizes.products, 'seeded exactly once');
  }
  for (const host of ['[bad', '']) {
    const raw = await rawRequest(ports[0]!, `GET /v1/products HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    t.match(raw, /^HTTP\/1\.1 400 /, `Host: "${host}" is a 400`);
    t.match(raw, /content-type: application\/problem\+json/i, 'with problem+json');
  }
  const files = (await import('../../db/migrations/meta/_journal.json', { with: { type: 'json' } })).default.entries.length;
  await withSession(env.DATABASE_URL, async (sql) => {
    const [migrations] = await sql`select count(*)::int as n from paginated_collections.__drizzle_migrations`;
    t.equal(migrations!.n, files, 'each migration applied once');
    const [orders] = await sql`select count(*)::int as n from demo.orders`;
    t.equal(orders!.n, defaultSizes.orders);
  });
  const codes = await Promise.all(servers.map(({ child }) => stopProcess(child)));
  t.same(codes, [0, 0], 'SIGTERM shuts both down cleanly');
});

/** Starts server.ts with `env` and waits for it to exit: its code and what it printed on stderr. */
async function failedStart(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  const child = spawn(process.execPath, ['server.ts'], {
    cwd: root,
    env: childEnv({ PORT: String(await freePort()), ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = await once(child, 'exit');
  return { code: code as number, stderr: stderr.trim() };
}

t.test('with DATABASE_URL and no COLLECTIONS, start-up stops with one line and touches nothing', async (t) => {
  const { url } = await scratchDatabase(t);
  const failed = await failedStart({ DATABASE_URL: url });
  t.equal(failed.code, 1);
  t.equal(
    failed.stderr,
    'COLLECTIONS is not set: name the tables to serve in a file (npm run --silent collections -- init > collections.yaml, then COLLECTIONS=collections.yaml; docs/reference/collections-file.md), or set COLLECTIONS=demo to serve the demo in this database',
  );
  const [made] = await withSession(
    url,
    (sql) => sql`
    select (select count(*)::int from pg_namespace where nspname not like 'pg\\_%' and nspname not in ('information_schema', 'public')) as schemas,
      (select count(*)::int from pg_class where relnamespace = 'public'::regnamespace) as relations`,
  );
  t.same(made, { schemas: 0, relations: 0 }, 'no schema, no table: nothing was migrated');
});

t.test('a collections file that cannot be served stops start-up with its problems, one line each, before any migration', async (t) => {
  const role = `t_${process.pid}_team_reader`;
  const admin = scratchSession(t, serverUrl());
  await admin.unsafe(`drop role if exists ${role}`);
  // With a password: the embedded default's server asks one of every role but its owner.
  await admin.unsafe(`create role ${role} login password 'reader'`);
  t.teardown(() => admin.unsafe(`drop role if exists ${role}`));
  // Made after the role: teardowns run last first, so the database and its grants go before the role does.
  const { url } = await scratchDatabase(t);
  await withSession(url, async (sql) => {
    await sql`create table films (film_id int primary key, title text not null, secret text)`;
    await sql.unsafe(`grant select (film_id, title) on films to ${role}`);
  });
  const folder = await mkdtemp(path.join(tmpdir(), 'collections-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  const file = path.join(folder, 'collections.yaml');
  await writeFile(file, 'collections:\n  - relation: public.films\n    columns: [film_id, titel]\n  - relation: public.missing\n');
  const bad = await failedStart({ DATABASE_URL: url, COLLECTIONS: file });
  t.equal(bad.code, 1);
  t.same(
    bad.stderr.split('\n'),
    [
      `Could not start: Invalid collections file ${file}, collection films: column titel: no such column in public.films`,
      `Could not start: Invalid collections file ${file}, collection missing: no relation public.missing in the database, or in the schemas read`,
    ],
    'each problem on a line of its own, naming the file, the collection and the problem',
  );
  // A column the data role may not read: refused at start-up, by name.
  await writeFile(file, 'collections:\n  - relation: public.films\n    columns: [film_id, title, secret]\n');
  const reader = new URL(url);
  reader.username = role;
  reader.password = 'reader';
  const refused = await failedStart({ DATABASE_URL: reader.toString(), COLLECTIONS: file });
  t.equal(refused.code, 1);
  t.match(
    refused.stderr,
    new RegExp(`^Could not start: Invalid collections file ${file}, collection films: column secret: the role may not SELECT it`),
  );
  t.equal(refused.stderr.split('\n').length, 1, 'one line');
  const missing = await failedStart({ DATABASE_URL: url, COLLECTIONS: path.join(folder, 'nope.yaml') });
  t.equal(missing.stderr, `Could not start: COLLECTIONS=${path.join(folder, 'nope.yaml')}: the file cannot be read (ENOENT)`);
  const [schemas] = await withSession(
    url,
    (check) => check`select count(*)::int as n from pg_namespace where nspname in ('paginated_collections', 'drizzle', 'demo')`,
  );
  t.equal(schemas!.n, 0, 'nothing was migrated');
});

t.test('npm start with no DATABASE_URL serves the demo collections on the embedded default', async (t) => {
  const server = await startServer(t, await freePort(), { HOME: process.env.HOME ?? '/root' });
  t.match(server.output(), /DATABASE_URL is not set: embedded PostgreSQL (started|already running) on port \d+.*, data in \//);
  for (const collection of ['products', 'orders', 'events']) {
    const res = await fetch(`${server.url}/v1/${collection}`);
    t.equal(res.status, 200, collection);
    t.ok(((await res.json())[collection] as unknown[]).length > 0, `${collection} has demo items`);
  }
  t.equal(await stopProcess(server.child), 0, 'SIGTERM stops the server and the embedded PostgreSQL');
});
