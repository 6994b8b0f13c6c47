// The request log: one JSON line per request with its id, route, status, duration, cost, tier, outcome and
// subject; never a key nor the query's values; a 500's error once, with its stack, on that line at `error`.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { createLogger, logRequest } from '../../lib/http/logger.ts';
import { type TestApp, testApp } from '../helpers/app.ts';
import { makeScratch, registryAhead } from '../helpers/collections.ts';
import { lockWaiters, testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { type LogLine, logLines } from '../helpers/logs.ts';
import { childEnv, freePort, stopProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';

/** A logger at `level` whose output the test reads back, raw and parsed. */
function capture(level: 'info' | 'warn' | 'silent' = 'info') {
  let raw = '';
  const logger = createLogger({ level, destination: { write: (text: string) => (raw += text) } });
  return { logger, raw: () => raw, lines: () => logLines(raw) };
}

t.test('a request line is written as pino writes the same fields at info, in the order of the other lines', async (t) => {
  for (const level of ['info', 'warn'] as const) {
    const { logger, raw } = capture(level);
    const fields = {
      reqId: 'a"b',
      method: 'GET',
      path: '/v1/x\u0001',
      status: 200,
      durationMs: 1.5,
      cost: undefined,
      pgMs: Number.NaN,
      tier: 'free',
    };
    logger.info('before');
    logRequest(logger, fields);
    logger.info(fields);
    logRequest(logger, {});
    logger.info({});
    const lines = raw().split('\n').slice(0, -1);
    if (level === 'warn') {
      t.same(lines, [], 'nothing below the level is written');
      continue;
    }
    t.equal(lines.length, 5);
    t.match(lines[0], /"msg":"before"/, 'the lines keep their order');
    const timeless = (line: string | undefined) => line?.replace(/"time":\d+/, '"time":0');
    t.equal(timeless(lines[1]), timeless(lines[2]), 'the same text as pino writes');
    t.equal(timeless(lines[3]), timeless(lines[4]), 'and for no fields at all');
  }
});

/** The one line logged for the request to `path` (the last one when the path was asked several times). */
function lineFor(lines: LogLine[], path: string): LogLine {
  const found = lines.filter((line) => line.path === path);
  if (found.length === 0) throw new Error(`No line for ${path} in ${JSON.stringify(lines)}`);
  return found.at(-1)!;
}

/**
 * A view whose reading divides by zero at its row of id 8: a statement that fails as no catalog change and no
 * database away does, which the service can only answer 500. (A dropped column or table is a 503 of its own.)
 */
const FRAGILE_DDL = `
  create table things (id int primary key, name text not null);
  insert into things select i, 'thing ' || i from generate_series(1, 10) i;
  create view fragile as select id, name, 10 / (id - 8) as x from things;`;
const FRAGILE_FILE = `
collections:
  - relation: scratch.fragile
    columns: [id, name, x]
    key: [id]
    filters: { name: [eq, ne] }
    unindexedSorts: true
    cost: { unindexedSort: 1 }
`;

/** An app serving the fragile view, logging to `logger`. */
async function fragileApp(t: { teardown(fn: () => unknown): void }, logger: ReturnType<typeof capture>['logger'], rateLimit: boolean) {
  const api = await testApp(t, { registry: await registryAhead(t, FRAGILE_DDL, FRAGILE_FILE), rateLimit, logger });
  await makeScratch(api.database.sql, FRAGILE_DDL);
  return api;
}

async function loggedApp(t: { teardown(fn: () => unknown): void }) {
  const log = capture();
  const api: TestApp = await testApp(t, { seed: { products: 30 }, rateLimit: true, logger: log.logger });
  return { api, log };
}

t.test('a served chunk: one line with every field, and nothing of the query string', async (t) => {
  const { api, log } = await loggedApp(t);
  const res = await api.request('/v1/products?limit=3&name[prefix]=Zzsecretprefix&category=books');
  t.equal(res.status, 200);
  await res.arrayBuffer();
  const lines = log.lines();
  t.equal(lines.length, 1, 'one line for one request');
  const line = lines[0]!;
  t.match(line, {
    level: 30,
    method: 'GET',
    path: '/v1/products',
    status: 200,
    tier: 'anonymous',
    outcome: 'served',
    subject: 'ip:192.0.2.1',
    cost: Number,
    durationMs: Number,
  });
  t.match(line.reqId, /^[0-9a-f-]{36}$/, 'a request id');
  t.ok(Math.abs(line.time - Date.now()) < 60_000, 'the time, in ms since the epoch');
  t.notMatch(log.raw(), /Zzsecretprefix|books|limit=/, 'no value nor name of the query string');

  await api.request('/healthz');
  t.match(lineFor(log.lines(), '/healthz'), { status: 200, outcome: 'served' }, 'routes outside the limit are logged too');
  t.not(lineFor(log.lines(), '/healthz').reqId, line.reqId, 'each request its own id');
});

t.test('a key is never logged: the subject is the key id', async (t) => {
  const { api, log } = await loggedApp(t);
  const issued = await api.json('/v1/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.equal(issued.status, 201);
  const key = issued.body.key as string;
  t.match(key, /^pck_/);
  const res = await api.request('/v1/products?limit=1', { headers: { authorization: `Bearer ${key}` } });
  t.equal(res.status, 200);
  t.match(lineFor(log.lines(), '/v1/products'), { subject: `key:${issued.body.id}`, tier: 'free', outcome: 'served' });
  const registration = lineFor(log.lines(), '/v1/keys');
  t.match(registration, { method: 'POST', status: 201, tier: 'registration', subject: 'reg:192.0.2.1' });
  t.notMatch(log.raw(), key, 'the key appears in no line');
  t.notMatch(log.raw(), key.slice(4, 20), 'nor any part of it');

  const bad = await api.request('/v1/products?limit=1', { headers: { authorization: 'Bearer pck_notakeyatall0000000000' } });
  t.equal(bad.status, 401);
  t.match(lineFor(log.lines(), '/v1/products'), { status: 401, outcome: 'invalid key', subject: 'ip:192.0.2.1' });
  t.notMatch(log.raw(), 'notakeyatall', 'an invalid key is not logged either');
});

t.test('declined and concurrency outcomes', async (t) => {
  const { api, log } = await loggedApp(t);
  await setTier(api.database.sql, 'anonymous', { allowance: 1, windowSeconds: 60, concurrency: 1 });
  t.equal((await api.request('/v1', { address: '198.51.100.1' })).status, 200);
  t.equal((await api.request('/v1', { address: '198.51.100.1' })).status, 429);
  t.match(lineFor(log.lines(), '/v1'), { status: 429, outcome: 'declined', subject: 'ip:198.51.100.1', cost: 1 });

  // One request held in flight by a lock on the table it reads; the same client's next is over its cap.
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 1 });
  const reserved = await api.database.sql.reserve();
  t.teardown(() => reserved.release());
  await reserved`begin`;
  await reserved`lock table demo.products in access exclusive mode`;
  const held = api.request('/v1/products?limit=1&count=none');
  await lockWaiters(api.database.sql, api.database.name, 1);
  const second = await api.request('/v1');
  t.equal(second.status, 429);
  t.match(lineFor(log.lines(), '/v1'), { status: 429, outcome: 'concurrency', subject: 'ip:192.0.2.1' });
  await reserved`commit`;
  t.equal((await held).status, 200);
});

t.test('a request whose query the database cancels: outcome unavailable', async (t) => {
  const { api, log } = await loggedApp(t);
  const reserved = await api.database.sql.reserve();
  t.teardown(() => reserved.release());
  await reserved`begin`;
  await reserved`lock table demo.products in access exclusive mode`;
  const answer = api.request('/v1/products?limit=1&count=none');
  await lockWaiters(api.database.sql, api.database.name, 1);
  // What a statement_timeout does, at once: query_canceled, a database that cannot serve now.
  await api.database.sql`
    select pg_cancel_backend(pid) from pg_stat_activity where datname = ${api.database.name} and wait_event_type = 'Lock'`;
  const res = await answer;
  await reserved`rollback`;
  t.equal(res.status, 503);
  t.match(lineFor(log.lines(), '/v1/products'), { level: 30, status: 503, outcome: 'unavailable', tier: 'anonymous' });
});

t.test('a 500: its error logged once, with the stack, on the request line at error, without the query values', async (t) => {
  const log = capture();
  const api = await fragileApp(t, log.logger, true);
  const res = await api.request('/v1/fragile?name[ne]=Zzfiltervalue&offset=0&limit=9');
  t.equal(res.status, 500);
  const lines = log.lines();
  t.equal(lines.length, 1, `one line: ${log.raw()}`);
  const line = lines[0]!;
  t.match(line, { level: 50, status: 500, path: '/v1/fragile', outcome: 'served', msg: 'Internal error' });
  const err = line.err as { type: string; message: string; stack: string; code?: string };
  t.match(err.stack, /\n\s+at /, 'with its stack');
  t.match(err, { type: 'PostgresError', code: '22012', message: 'division by zero' }, "the driver's error");
  t.notMatch(log.raw(), 'Zzfiltervalue', 'the filter value is in no line, message and stack included');
});

t.test("Drizzle's query error: logged with its statement and stack, without its parameters", async (t) => {
  const log = capture();
  const cause = Object.assign(new Error('duplicate key value violates unique constraint "api_keys_pkey"'), { code: '23505' });
  const error = new DrizzleQueryError('insert into "api_keys" ("id", "hash") values ($1, $2)', ['key_Zzsecretid', 'Zzsecrethash'], cause);
  t.match(error.message, /Zzsecretid/, "Drizzle's own message lists the parameters");
  log.logger.error({ err: error }, 'Internal error');
  const [line] = log.lines();
  t.match(line!.err, {
    type: 'DrizzleQueryError',
    message: 'Failed query: insert into "api_keys" ("id", "hash") values ($1, $2)',
    stack: /^Error: Failed query: insert into .*\n\s+at /s,
    cause: { code: '23505', message: /duplicate key/ },
  });
  t.notMatch(log.raw(), /Zzsecret/, 'no parameter anywhere in the line');
});

t.test('levels: warn logs no request line but still the error; silent logs nothing', async (t) => {
  for (const level of ['warn', 'silent'] as const) {
    const log = capture(level);
    const api = await fragileApp(t, log.logger, false);
    t.equal((await api.request('/v1/fragile?limit=2&offset=0')).status, 200);
    t.equal((await api.request('/v1/fragile?limit=9&offset=0')).status, 500);
    t.same(
      log.lines().map((line) => [line.level, line.status]),
      level === 'warn' ? [[50, 500]] : [],
      level,
    );
  }
});

t.test('pretty lines on a terminal: a process whose stdout is a terminal reads them, no JSON', async (t) => {
  const db = await testDatabase(t);
  await seedTable(db.sql, 'products', 5);
  const port = await freePort();
  const root = fileURLToPath(new URL('../..', import.meta.url));
  // script(1) gives the server a pseudo-terminal as its stdout, as a person's terminal would.
  // `exec`: the server is script's own child, and a signal to script reaches it (a closed terminal's SIGHUP only
  // reloads the service's collections, so script's end alone would leave the server running).
  const child = spawn('script', ['-qfec', `exec ${process.execPath} server.ts`, '/dev/null'], {
    cwd: root,
    env: childEnv({ DATABASE_URL: db.url, COLLECTIONS: 'demo', PORT: String(port), NO_COLOR: '1' }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  t.teardown(async () => {
    // The server first, by its pid (script's child, as `exec` made it), then script, which ends with it.
    const server = Number(
      spawnSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' })
        .stdout.trim()
        .split('\n')[0],
    );
    if (server > 0) process.kill(server, 'SIGTERM');
    await stopProcess(child, { graceMs: 5000 });
  });
  await waitFor('the server to listen', () => output, { until: (text) => text.includes('Listening on'), timeoutMs: 60_000 });
  t.equal((await fetch(`http://127.0.0.1:${port}/v1/products?limit=2`)).status, 200);
  await waitFor('the request line', () => output, { until: (text) => text.includes('/v1/products 200'), timeoutMs: 5000 });
  t.match(stripVTControlCharacters(output), /INFO: GET \/v1\/products 200 [\d.]+ ms served ip:127\.0\.0\.1\r?\n/, 'one line');
  t.notMatch(output, /"level":/, 'no JSON line');
});

t.test('lines batched on stdout are written when the process exits, however soon after them', async (t) => {
  const logger = fileURLToPath(new URL('../../lib/http/logger.ts', import.meta.url));
  // The service's own logger (JSON lines, buffered: lib/http/logger.ts), a line of pino's and a request line,
  // and an exit at once: the lines are in the buffer, short of its batch's size and before its periodic flush.
  const script = `import { createLogger, logRequest } from ${JSON.stringify(logger)};
    const logger = createLogger({ level: 'info' });
    logger.info({ reqId: 'the-line-before' }, 'request');
    logRequest(logger, { reqId: 'the-last-line' });
    process.exit(0);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise((resolve) => child.once('close', resolve));
  t.equal(code, 0, output);
  t.match(output, /"reqId":"the-line-before".*\n.*"reqId":"the-last-line"/, "pino's line and the request line are written, in their order");
});
