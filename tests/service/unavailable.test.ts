// A collection the catalog no longer serves as its file says (docs/how-to/schema-changes.md): answered 503
// collection_unavailable while the others are served, listed by /readyz and /metrics, left out of /v1 and the
// description; a statement that meets a changed catalog is a 503, never a 500, and has the catalog read again; a
// reading that fails keeps what is served; a burst of reloads is one reading; a problem of the file itself is no
// collection's to be unavailable for.
import t from 'tap';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';
import { CollectionsFileError } from '../../lib/collections/problems.ts';
import { createLogger } from '../../lib/http/logger.ts';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import { loadServed, type Served } from '../../lib/pagination/runtime.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { LiveCollections } from '../../lib/service/served-collections.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { makeScratch } from '../helpers/collections.ts';
import { testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { waitFor } from '../helpers/wait.ts';

const DDL = `
  create table plain (id int primary key, label text not null);
  insert into plain select n, 'plain ' || n from generate_series(1, 30) n;
  create table shaky (id int primary key, label text not null);
  insert into shaky select n, 'shaky ' || n from generate_series(1, 30) n;
`;

const FILE = `
collections:
  - relation: scratch.plain
    columns: [id, label]
  - relation: scratch.shaky
    columns: [id, label, note]
`;

/** An app over a LiveCollections of `file` (a text that may change), its log lines, and how it is read again. */
async function liveApp(t: { teardown(fn: () => unknown): void }, ddl: string, text: { file: string }) {
  const database = await testDatabase(t);
  await makeScratch(database.sql, ddl);
  await setTier(database.sql, 'anonymous', { allowance: 100_000, windowSeconds: 60, concurrency: 100 });
  const read = (earlier?: Served) =>
    loadServed(database.sql, text.file, 'collections.yaml', { schemas: ['scratch'], serviceSchema: SERVICE_SCHEMA, earlier });
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (line: string) => lines.push(JSON.parse(line)) } });
  const collections = new LiveCollections(await read(), { read, logger, source: 'collections.yaml', debounceMs: 50 });
  t.teardown(() => collections.close());
  const config = parseConfig({ ADMIN_TOKEN });
  const cursorSecret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  const app = buildApp({
    database,
    config,
    registry: collections,
    cursorSecret,
    rateLimit: { housekeepingMs: 0 },
    remoteAddress: () => '192.0.2.1',
    logger,
  });
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await app.request(`http://test.local${path}`, { headers });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
  };
  const messages = () => lines.filter((line) => line.reqId === undefined).map((line) => String(line.msg));
  return { database, collections, get, messages };
}

t.test('a collection unavailable is a 503 through the limiter, the others are served, and every listing says so', async (t) => {
  const text = { file: FILE };
  const { database, collections, get, messages } = await liveApp(t, DDL, text);
  t.match(messages(), [], 'nothing logged by the app yet');
  t.same([...collections.current().unavailable.keys()], ['shaky']);

  const refused = await get('/v1/shaky');
  t.equal(refused.status, 503);
  t.match(refused.body, { code: 'collection_unavailable', status: 503, detail: /^Collection shaky is unavailable/ });
  t.notMatch(JSON.stringify(refused.body), /note/, 'the problem is for the log, not the client');
  t.equal(refused.headers.get('retry-after'), '5');
  t.ok(refused.headers.get('x-ratelimit-limit'), 'answered through the rate limiter');
  t.equal((await get('/v1/plain')).status, 200, 'the other is served');
  t.same((await get('/readyz')).body, {
    status: 'ready',
    collections: { generation: 1, hash: collections.current().hash, unavailable: ['shaky'] },
  });
  t.same(Object.keys((await get('/v1')).body._links), ['self', 'plain'], '/v1 links what is served');
  const paths = Object.keys((await get('/openapi.json')).body.paths);
  t.ok(paths.includes('/v1/plain') && !paths.includes('/v1/shaky'), 'the description describes what is served');
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const metrics = (await get('/metrics', admin)).body as string;
  t.match(metrics, /collections_unavailable\{collection="shaky"\} 1/);
  t.match(metrics, new RegExp(`collections_generation\\{hash="${collections.current().hash}"\\} 1`));
  t.match(metrics, /http_unavailable_total\{cause="collection"\} 1/);

  // The column added, the catalog read again: served, under a new generation.
  await database.sql`alter table scratch.shaky add column note text`;
  collections.reload('a test');
  await waitFor('generation 2', () => collections.current().number, { until: (number) => number === 2 });
  t.equal((await get('/v1/shaky')).status, 200);
  t.same((await get('/readyz')).body.collections.unavailable, []);
  const later = (await get('/metrics', admin)).body as string;
  t.notMatch(later, /collections_unavailable\{/);
  t.match(later, /collections_reloads_total\{result="changed"\} 1/);
  t.ok(Object.keys((await get('/openapi.json')).body.paths).includes('/v1/shaky'), 'and described');
  // The reading that saw the column: the test's, or the one the refused request above asked for, when it began
  // after the column was added and before the test asked (a request for an unavailable collection asks too).
  t.match(messages().slice(-2), [
    'Collection shaky is served again',
    /^Serving generation 2 \([0-9a-f]{12}\) of collections\.yaml: plain, shaky \(read again: (.*; )?(a test|a request for shaky, unavailable)(; .*)?; read in \d+ ms\)$/,
  ]);
});

t.test('a statement that meets a changed catalog is a 503, never a 500, and the catalog is read again', async (t) => {
  const { database, collections, get, messages } = await liveApp(t, DDL, { file: FILE.replace(', note]', ']') });
  t.equal((await get('/v1/plain?limit=2&count=exact')).status, 200);
  await database.sql`alter table scratch.plain drop column label`;
  // The planner's estimate meets it first (a count), then the chunk's own statement.
  const estimated = await get('/v1/plain?count=exact&limit=3');
  t.equal(estimated.status, 503, 'the estimate');
  t.equal(estimated.body.code, 'collection_unavailable');
  t.equal(estimated.headers.get('retry-after'), '1');
  const read = await get('/v1/plain?count=none&limit=4');
  t.equal(read.status, 503, 'the chunk');
  t.equal(read.body.code, 'collection_unavailable');
  t.equal(read.headers.get('retry-after'), '1', 'the catalog is being read again');
  t.equal((await get('/v1/shaky')).status, 200, 'the other is served');
  await waitFor('plain unavailable', () => collections.current().unavailable.has('plain'));
  t.equal(collections.current().number, 2, 'one reading for both');
  t.equal((await get('/v1/plain')).headers.get('retry-after'), '5');
  t.match(messages(), [
    /^Collection plain is unavailable, answered 503 collection_unavailable: Invalid collections file collections\.yaml, collection plain: column label: no such column in scratch\.plain$/,
    /^Serving generation 2 .*: shaky; unavailable: plain \(read again: a statement of plain failed: 42703 column "label" does not exist; read in \d+ ms\)$/,
  ]);
});

t.test('a reading that fails keeps what is served and says why; a burst is one reading', async (t) => {
  const text = { file: FILE.replace(', note]', ']') };
  const { collections, get, messages } = await liveApp(t, DDL, text);
  const { hash } = collections.current();
  text.file = 'collections:\n  - relation: [';
  collections.reload('SIGHUP');
  await waitFor('the failed reading', () => collections.reloads.failed, { until: (n) => n === 1 });
  t.match(messages(), [/^Collections not read again \(SIGHUP; after \d+ ms\): .*; still serving generation 1 \([0-9a-f]{12}\)$/]);
  // A problem of the file itself (not of the catalog) fails the reading too, however good the rest.
  text.file = `${FILE.replace(', note]', ']')}    pageSize: { default: 50, max: 10 }\n`;
  collections.reload('SIGHUP');
  await waitFor('the second failed reading', () => collections.reloads.failed, { until: (n) => n === 2 });
  t.match(messages()[1], /pageSize\.default 50 is over pageSize\.max 10; still serving generation 1/);
  t.same([collections.current().number, collections.current().hash], [1, hash]);
  t.equal((await get('/v1/shaky')).status, 200, 'served as before');

  text.file = FILE.replace(', note]', ']').replace(
    'columns: [id, label]\n  - relation: scratch.shaky',
    'columns: [id]\n  - relation: scratch.shaky',
  );
  for (let i = 0; i < 10; i++) collections.reload(`NOTIFY ${i % 2}`);
  await waitFor('the reading', () => collections.reloads.changed, { until: (n) => n === 1 });
  t.same(collections.reloads, { changed: 1, unchanged: 0, failed: 2 }, 'ten asked for at once: one reading');
  t.match(messages()[2], /\(read again: NOTIFY 0; NOTIFY 1; read in \d+ ms\)$/);
  t.same(Object.keys((await get('/v1/plain?limit=1')).body.plain[0]), ['id'], 'the new file served');
});

t.test('a problem of the file itself stops it being served; a problem of the catalog leaves its collection unavailable', async (t) => {
  const { database } = await liveApp(t, DDL, { file: FILE });
  const load = (file: string) => loadServed(database.sql, file, 'c.yaml', { schemas: ['scratch'], serviceSchema: SERVICE_SCHEMA });
  const cases: [string, string][] = [
    ['a collection name', '  - relation: scratch.plain\n    name: "1plain"\n'],
    ['a reserved name', '  - relation: scratch.plain\n    name: keys\n'],
    ['a name taken', '  - relation: scratch.plain\n  - relation: scratch.shaky\n    name: plain\n'],
    ['a default variant not offered', '  - relation: scratch.plain\n    variants: [offset]\n    defaultVariant: cursor\n'],
    ['a column named but not served', '  - relation: scratch.plain\n    columns: [label]\n    key: [id]\n'],
    ['a time variant without its column', '  - relation: scratch.plain\n    variants: [time]\n'],
    ['page sizes', '  - relation: scratch.plain\n    pageSize: { default: 50, max: 10 }\n'],
  ];
  for (const [what, entries] of cases) {
    const error = await load(`collections:\n${entries}  - relation: scratch.shaky\n    columns: [id, label]\n`).catch((e: unknown) => e);
    t.ok(error instanceof CollectionsFileError, `${what}: the file's own problem`);
  }
  const catalog: [string, string, RegExp][] = [
    ['no relation', '  - relation: scratch.nowhere\n', /no relation scratch\.nowhere/],
    ['no column', '  - relation: scratch.plain\n    columns: [id, nope]\n', /column nope: no such column/],
    ['no index for a sort', '  - relation: scratch.plain\n    sort: [label]\n', /no btree index serves it/],
    [
      'a type with no order',
      '  - relation: scratch.plain\n    columns: [id, label, doc]\n    sort: [doc]\n',
      /of type jsonb, which has no order/,
    ],
  ];
  await database.sql`alter table scratch.plain add column doc jsonb`;
  for (const [what, entry, problem] of catalog) {
    const served = await load(`collections:\n${entry}  - relation: scratch.shaky\n    columns: [id, label]\n`);
    t.same([...served.registry.keys()], ['shaky'], `${what}: the other served`);
    const [name] = served.unavailable.keys();
    t.match(served.unavailable.get(name!), [problem], `${what}: unavailable, with its problem`);
  }
});
