// postgres.js's private fields, as db/driver.ts reads them, on a real server: a query's backend pid, the canceller
// that cancels its running statement, the `onactive` hook that tells when the statement runs, the patch's pool
// state, its hook on opened connections, its writes when handed and its statement signatures, and the pin to postgres.js 3.4.9 with its
// patch. A release that moves any of them fails here. Host lists and target_session_attrs: tests/db/host-list.test.ts.
import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from 'postgres';
import t from 'tap';
import {
  awaitingConnection,
  backendPid,
  cancelKeyPid,
  checkDriver,
  DRIVER_VERSION,
  onServer,
  poolStatsOf,
  takeCanceller,
  whenRunning,
  writeWhenHanded,
} from '../../db/driver.ts';
import { hostName, parsePostgresUrl } from '../../db/url.ts';
import { scratchSession, serverClockMs, serverUrl, withSession } from '../helpers/db.ts';
import { holdEventLoop } from '../helpers/wait.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const patch = pathToFileURL(path.join(root, `patches/postgres+${DRIVER_VERSION}.patch`));

/** Resolves once the query's connection marks it active (whenRunning), with when. */
function running(query: object): Promise<number> {
  return new Promise((resolve) => whenRunning(query, () => resolve(performance.now())));
}

t.test("a query's backend pid is pg_backend_pid(), unknown while it waits for a connection", async (t) => {
  const sql = scratchSession(t, serverUrl());
  const query = sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
  t.equal(backendPid(query), undefined, 'no pid before a connection took it');
  t.ok(awaitingConnection(query), 'it waits for a connection');
  const result = await query;
  t.type(result[0]!.pid, 'number');
  t.equal(backendPid(query), result[0]!.pid, "the pid of the query's connection");
  t.notOk(awaitingConnection(query), 'handed to a connection');
  t.equal(cancelKeyPid(result), result[0]!.pid, "the result's cancel key names the backend (no pooler in between)");
});

t.test('the canceller cancels a running pg_sleep, once', async (t) => {
  const sql = scratchSession(t, serverUrl());
  const watch = scratchSession(t, serverUrl());
  await sql`select 1`;
  const sleeping = sql`select pg_sleep(30)`;
  const started = running(sleeping);
  const settled = sleeping.then(
    () => undefined,
    (error: unknown) => error,
  );
  await started;
  const pid = backendPid(sleeping)!;
  const [before] = await watch<{ state: string; query: string }[]>`select state, query from pg_stat_activity where pid = ${pid}`;
  t.same(before, { state: 'active', query: 'select pg_sleep(30)' }, 'the statement runs on that backend');
  const cancel = takeCanceller(sleeping);
  t.type(cancel, 'function', 'the pool gave the query its canceller');
  t.equal(takeCanceller(sleeping), undefined, 'taken once');
  t.equal(sleeping.cancel(), null, 'Query.cancel() finds it taken');
  const at = performance.now();
  await cancel!();
  const error = (await settled) as { code?: string; message?: string } | undefined;
  t.match(error, { code: '57014', message: /user request/ }, 'PostgreSQL cancelled it at the request');
  t.ok(performance.now() - at < 5000, 'at once, not after its 30 s');
  t.same(await sql`select 1 as one`, [{ one: 1 }], 'the connection serves the next statement');
});

t.test('the active hook: once, when the statement is the one its connection runs', async (t) => {
  const sql = scratchSession(t, serverUrl());
  await sql`select 1`;
  const issued = performance.now();
  const first = sql`select pg_sleep(0.3)`;
  const second = sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const firstRunning = running(first);
  const runs: number[] = [];
  whenRunning(second, () => runs.push(performance.now()));
  let firstDone: number | undefined;
  const firstResult = first.then(() => {
    firstDone = performance.now();
  });
  const rows = second.then((result) => result);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.notOk(awaitingConnection(second), 'the second is pipelined on the connection behind the first');
  t.same(runs, [], 'and not yet running');
  const firstAt = await firstRunning;
  t.ok(firstAt - issued < 100, 'the first runs at once');
  await firstResult;
  t.equal(runs.length, 1, 'the second runs once the first is over');
  t.ok(runs[0]! - issued >= 250, `after the first's 300 ms (${(runs[0]! - issued).toFixed(0)} ms)`);
  t.ok(runs[0]! <= firstDone!, "as the first's answer ends, before its result is read");
  t.equal((await rows)[0]!.pid, backendPid(second), 'the second is answered with the hook in place');
  t.equal(runs.length, 1, 'the hook ran once');
  const active = Object.getOwnPropertyDescriptor(second, 'active');
  t.same(
    active,
    { value: false, writable: true, enumerable: true, configurable: true },
    "the query's own `active` field stays a plain field",
  );
});

t.test("the patch's pool state", async (t) => {
  const sql = scratchSession(t, serverUrl());
  const read = poolStatsOf(sql);
  t.type(read, 'function', 'a postgres.js client has it');
  t.same(read!(), { open: 0, inUse: 0, waiting: 0, servers: {} }, 'nothing open yet');
  await sql`select 1`;
  // The URL's one host, as the server's connections are counted by.
  const servers = { [hostName(parsePostgresUrl(serverUrl()).hosts[0]!)]: 1 };
  t.same(read!(), { open: 1, inUse: 0, waiting: 0, servers }, "one connection open, idle, to the URL's host");
  const first = sql`select pg_sleep(0.3)`;
  const second = sql`select pg_sleep(0.3)`;
  const [firstRunning, secondRunning] = [running(first), running(second)];
  const done = Promise.all([first, second]);
  await firstRunning;
  t.same(read!(), { open: 1, inUse: 1, waiting: 1, servers }, 'one statement runs, the other waits behind it');
  await secondRunning;
  t.same(read!(), { open: 1, inUse: 1, waiting: 0, servers }, 'then the other runs');
  await done;
  t.same(read!(), { open: 1, inUse: 0, waiting: 0, servers }, 'idle again');
});

t.test("the patch's hook on opened connections: each connection's host:port, before its first statement runs", async (t) => {
  const opened: string[] = [];
  const sql = postgres(serverUrl(), { max: 2, onnotice: () => {}, ...onServer((server) => opened.push(server)) });
  t.teardown(() => sql.end({ timeout: 1 }));
  const host = hostName(parsePostgresUrl(serverUrl()).hosts[0]!);
  const query = sql`select 1`;
  const told = new Promise<number>((resolve) => whenRunning(query, () => resolve(opened.length)));
  await query;
  t.equal(await told, 1, 'told when the connection opened, before the statement ran');
  await Promise.all([sql`select pg_sleep(0.05)`, sql`select pg_sleep(0.05)`]);
  t.same(opened, [host, host], 'once per connection opened, naming its host');
});

/**
 * Sends two statements that read the server's clock from a setImmediate callback (then writeWhenHanded when
 * `handed`), holds the event loop for `holdMs` in the next callback of the same turn, and then reads the clock once
 * more: what the first two read, as milliseconds before the last. About `holdMs` when they ran during the hold,
 * nearly nothing when their writes waited for the next turn, after it.
 */
function beforeHoldEnd(sql: postgres.Sql, handed: boolean, holdMs: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    let sent: Promise<number[]> | undefined;
    setImmediate(() => {
      sent = Promise.all([serverClockMs(sql), serverClockMs(sql)]);
      if (handed) writeWhenHanded(sql);
    });
    // The next callback of the same turn: postgres.js's own writes, set for the next turn, have not run yet.
    setImmediate(() => {
      holdEventLoop(holdMs);
      Promise.all([sent!, serverClockMs(sql)]).then(([clocks, last]) => resolve(clocks.map((ms) => last - ms)), reject);
    });
  });
}

t.test("the patch's writes when handed: statements sent from a setImmediate callback are on the wire before the turn ends", async (t) => {
  // Two connections, both open: each is handed one of the two statements, and each writes it.
  const sql = postgres(serverUrl(), { max: 2, onnotice: () => {} });
  t.teardown(() => sql.end({ timeout: 1 }));
  await Promise.all([sql`select pg_sleep(0.05)`, sql`select pg_sleep(0.05)`]);
  t.equal(poolStatsOf(sql)!().open, 2, 'both connections open');
  const held = 300;
  const handed = await beforeHoldEnd(sql, true, held);
  t.ok(
    handed.every((ms) => ms >= held * 0.8),
    `written when handed, both ran while the loop was held: ${handed.map((ms) => ms.toFixed(1)).join(', ')} ms before the last`,
  );
  const deferred = await beforeHoldEnd(sql, false, held);
  t.ok(
    deferred.every((ms) => ms < held * 0.5),
    `otherwise written a turn later, after the hold: ${deferred.map((ms) => ms.toFixed(1)).join(', ')} ms before the last`,
  );
});

t.test('the pin: postgres.js 3.4.9 with the patch, and nothing else', async (t) => {
  const installed = JSON.parse(await readFile(path.join(root, 'node_modules/postgres/package.json'), 'utf8')) as { version: string };
  t.equal(installed.version, DRIVER_VERSION, 'the installed release is the pinned one');
  const entry = new URL(import.meta.resolve('postgres'));
  t.doesNotThrow(() => checkDriver(entry, patch), 'the installed copy passes');

  const copy = path.join(t.testdir({}), 'node_modules/postgres');
  await cp(path.join(root, 'node_modules/postgres'), copy, { recursive: true });
  const copyEntry = pathToFileURL(path.join(copy, 'src/index.js'));
  t.doesNotThrow(() => checkDriver(copyEntry, patch), 'a copy of it passes');
  t.doesNotThrow(() => checkDriver(pathToFileURL(path.join(copy, 'cjs/src/index.js')), patch), 'so does its CommonJS build');

  const manifest = path.join(copy, 'package.json');
  const original = await readFile(manifest, 'utf8');
  await writeFile(manifest, original.replace(`"version": "${DRIVER_VERSION}"`, '"version": "3.4.10"'));
  t.throws(() => checkDriver(copyEntry, patch), { message: /^Unpinned postgres\.js: 3\.4\.10 is installed/ }, 'another release fails');
  await writeFile(manifest, original);

  const connection = path.join(copy, 'src/connection.js');
  const patched = await readFile(connection, 'utf8');
  await writeFile(connection, patched.replace('fetchArrayTypes().catch(errored)', 'fetchArrayTypes()'));
  t.throws(
    () => checkDriver(copyEntry, patch),
    { message: /^Unpatched postgres\.js: src\/connection\.js lacks a line the patch adds: return fetchArrayTypes\(\)\.catch\(errored\)$/ },
    'a file the patch misses fails',
  );
  t.doesNotThrow(
    () => checkDriver(pathToFileURL(path.join(copy, 'cjs/src/index.js')), patch),
    'only the copy the runtime loads is looked at',
  );
  await writeFile(connection, patched);

  await rm(path.join(copy, 'src/queue.js'));
  t.throws(
    () => checkDriver(copyEntry, patch),
    { message: /^Unpatched postgres\.js: src\/queue\.js cannot be read/ },
    'a missing file fails',
  );
  t.throws(
    () => checkDriver(entry, pathToFileURL(path.join(root, 'patches/postgres+3.4.8.patch'))),
    { message: /^Unpatched postgres\.js: its patch cannot be read/ },
    'so does a missing patch',
  );
});

t.test('a query after one that failed mid-stream gets its own rows, from the first', async (t) => {
  const sql = scratchSession(t, serverUrl());
  // Rows 1 and 2 are sent before row 3 divides by zero; the second query is sent behind it on the one connection.
  const failed = sql`select i, 1 / (3 - i) as boom from generate_series(1, 10) as i`.catch((error: { code: string }) => error.code);
  const next = sql`select x from generate_series(1, 5) as x`;
  t.equal(await failed, '22012', 'division by zero');
  const rows = await next;
  t.equal(rows.length, 5, 'five rows, no holes before them');
  t.same(
    rows.map((row) => row.x),
    [1, 2, 3, 4, 5],
  );
});

t.test("the patch's signatures: one named statement per text and types, however often it runs, and again after a reconnect", async (t) => {
  const sql = scratchSession(t, serverUrl());
  const text = 'select $1 as v';
  // Run as lib/pagination/statement.ts runs a shape's named statement.
  const value = async (parameter: unknown) => (await sql.unsafe(text, [parameter as number], { prepare: true }))[0]!.v as unknown;
  const prepared = async () => (await sql`select count(*)::int as n from pg_prepared_statements where statement = ${text}`)[0]!.n as number;
  // A number is sent untyped (PostgreSQL reads it as text); a boolean as bool: one text, two signatures.
  for (let i = 0; i < 3; i++) {
    t.equal(await value(i), String(i), 'the untyped parameter comes back as text');
    t.equal(await value(i % 2 === 0), i % 2 === 0, 'the boolean comes back as a boolean, not as the text statement would give it');
  }
  t.equal(await prepared(), 2, 'one named statement for each of the two signatures, made once');

  const pid = (await sql<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid;
  // Waits for the backend to exit: a statement sent while it still ran could be answered, and the next one lost.
  await withSession(serverUrl(), (other) => other`select pg_terminate_backend(${pid}, 5000)`);
  await sql`select 1`.catch(() => undefined); // the statement that finds the connection gone
  t.equal(await value(true), true, 'after the reconnect, each statement is prepared again on the new connection');
  t.equal(await value(7), '7');
  t.equal(await prepared(), 2, 'the new connection holds its own two');
});

t.test("the patch's reading of messages: many in one read, and one across many reads, each whole and in order", async (t) => {
  const sql = scratchSession(t, serverUrl());
  // Thousands of short rows: many messages in each read of the socket, and one cut across two reads now and then.
  const many = await sql`select i, repeat('x', i % 37) as pad from generate_series(1, 20000) as i`;
  t.equal(many.length, 20000);
  t.equal(
    many.findIndex((row, at) => row.i !== at + 1 || row.pad !== 'x'.repeat((at + 1) % 37)),
    -1,
    'every row whole, in order: no first one otherwise',
  );
  // Rows of 3 MB each: one message over many reads, between short ones.
  const big = await sql`select i, repeat(chr(64 + i), 3000000) as text from generate_series(1, 3) as i`;
  t.same(
    big.map((row) => [row.i, row.text.length, row.text[0], row.text.at(-1)]),
    [1, 2, 3].map((i) => [i, 3000000, String.fromCharCode(64 + i), String.fromCharCode(64 + i)]),
  );
  // The connection reads on from where the long messages left it.
  t.same(await sql`select 1 as one`, [{ one: 1 }]);
});
