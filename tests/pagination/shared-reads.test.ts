// Identical reads asked for in the same turn of the event loop share one statement (lib/pagination/shared-reads.ts,
// runShape); a read asked for after the statement was sent gets its own; every request is still charged.
import { sql as drizzleSql } from 'drizzle-orm';
import t from 'tap';
import { openDatabase } from '../../db/client.ts';
import { createLogger } from '../../lib/http/logger.ts';
import { shapeOf } from '../../lib/pagination/shapes.ts';
import { runShape } from '../../lib/pagination/shared-reads.ts';
import { testApp } from '../helpers/app.ts';
import { makeScratch, registryAhead } from '../helpers/collections.ts';
import { serverClockMs, testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { type LogLine, logLines } from '../helpers/logs.ts';
import { holdEventLoop } from '../helpers/wait.ts';

/** A shape with one placeholder `x`, built from SQL text as Drizzle would hand it over. */
const built = (text: string) => () => ({ toSQL: () => ({ sql: text, params: [drizzleSql.placeholder('x')] }) });

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

t.test('reads of one shape and values in one turn share a statement; others, and later ones, do not', async (t) => {
  const db = await testDatabase(t);
  await db.sql`create sequence shared_reads`;
  const counted = shapeOf(db, 'shared-reads:counted', built(`select nextval('shared_reads')::int as n, $1::int as x`));

  const same = await Promise.all(Array.from({ length: 5 }, () => runShape(db, counted, { x: 1 })));
  t.same(same[0], [[1, 1]], 'one statement ran');
  t.same(
    same.map((rows) => rows === same[0]),
    [true, true, true, true, true],
    'all five got the same rows',
  );

  const apart = await Promise.all([runShape(db, counted, { x: 1 }), runShape(db, counted, { x: 2 }), runShape(db, counted, { x: 1 })]);
  t.same(
    apart.map((rows) => rows[0]![1]),
    [1, 2, 1],
  );
  t.equal(apart[0], apart[2], 'the same values share');
  t.not(apart[0]![0]![0], apart[1]![0]![0], 'other values get their own statement');

  const next = await runShape(db, counted, { x: 1 });
  t.not(next[0]![0], apart[0]![0]![0], 'a read of a later turn gets its own statement');

  const other = openDatabase(db.url, { max: 1 });
  t.teardown(() => other.close());
  // The same key on another pool: a shape of its own.
  const otherShape = shapeOf(other, 'shared-reads:counted', built(`select 1000 + nextval('shared_reads')::int as n, $1::int as x`));
  const pools = await Promise.all([runShape(db, counted, { x: 3 }), runShape(other, otherShape, { x: 3 })]);
  t.not(pools[0]![0]![0], pools[1]![0]![0], 'reads on two pools do not share');
  const foreign = await Promise.all([runShape(other, counted, { x: 4 }), runShape(other, otherShape, { x: 4 })]);
  t.ok(
    (foreign[0]![0]![0] as number) < 1000 && (foreign[1]![0]![0] as number) > 1000,
    'a shape of another pool run on this one is not taken for its shape of the same key',
  );
});

t.test('a read asked for once the statement was sent does not join it', async (t) => {
  const db = await testDatabase(t);
  await db.sql`create sequence shared_reads`;
  const slow = shapeOf(db, 'shared-reads:slow', built(`select nextval('shared_reads')::int as n, pg_sleep($1::int / 10.0)::text as slept`));
  let firstDone = false;
  const first = runShape(db, slow, { x: 2 }).then((rows) => {
    firstDone = true;
    return rows;
  });
  await turn();
  await turn();
  t.notOk(firstDone, 'the first statement is still running');
  const second = runShape(db, slow, { x: 2 });
  const [a, b] = await Promise.all([first, second]);
  t.same([a[0]![0], b[0]![0]], [1, 2], 'two statements: the second sees what was there when it was asked for');
});

t.test("a turn's reads are on the wire before the turn ends, not a turn later", async (t) => {
  const db = await testDatabase(t, { max: 2 });
  const clocked = shapeOf(
    db,
    'shared-reads:clocked',
    built('select extract(epoch from clock_timestamp())::float8 * 1000 as ms, $1::int as x'),
  );
  // Both connections open, and the shape prepared on each: the measured reads are only written and run.
  await Promise.all([1, 2, 3, 4].map((x) => runShape(db, clocked, { x })));
  const held = 300;
  const [reads, last] = await new Promise<[unknown[][][], number]>((resolve, reject) => {
    // A timer's callback, as a request's would be a poll's: the coalescer sends the reads from a setImmediate
    // callback of this turn, and the one below, queued after it, holds the loop once it has.
    setTimeout(() => {
      const asked = Promise.all([runShape(db, clocked, { x: 5 }), runShape(db, clocked, { x: 6 })]);
      setImmediate(() => {
        holdEventLoop(held);
        Promise.all([asked, serverClockMs(db.sql)]).then(resolve, reject);
      });
    }, 0);
  });
  const before = reads.map((rows) => last - (rows[0]![0] as number));
  t.ok(
    before.every((ms) => ms >= held * 0.8),
    `both ran while the loop was held: ${before.map((ms) => ms.toFixed(1)).join(', ')} ms before the statement sent after the hold (held ${held} ms)`,
  );
});

t.test('a statement that fails rejects every read that joined it; the next turn starts anew', async (t) => {
  const db = await testDatabase(t);
  const divide = shapeOf(db, 'shared-reads:divide', built('select 10 / $1::int as q'));
  const results = await Promise.allSettled(Array.from({ length: 3 }, () => runShape(db, divide, { x: 0 })));
  t.same(
    results.map((result) => result.status),
    ['rejected', 'rejected', 'rejected'],
  );
  t.same(
    results.map((result) => (result as PromiseRejectedResult).reason.code),
    ['22012', '22012', '22012'],
    'each with the error: division by zero',
  );
  t.same(await runShape(db, divide, { x: 5 }), [[2]]);
});

/** A view whose column `n` is drawn from a sequence at every read: two statements never answer alike. */
const COUNTED_VIEW = `
  create sequence counted_reads;
  create view counted as select id::int8 as id, nextval('counted_reads') as n from generate_series(1, 50) as id;`;
/** Served with its order by id priced as along the key's index, which a view has not. */
const COUNTED_FILE = `
collections:
  - relation: scratch.counted
    key: [id]
    variants: [offset, cursor]
    defaultVariant: cursor
    filters: { id: [eq, gt] }
    sort: [id]
    order: id
    unindexedSorts: true
    pageSize: { default: 5 }
    cost: { indexed: { id: 10000 } }
`;

t.test('identical requests at the same time get one read and answers alike; each is charged', async (t) => {
  const registry = await registryAhead(t, COUNTED_VIEW, COUNTED_FILE);
  const api = await testApp(t, { registry });
  await makeScratch(api.database.sql, COUNTED_VIEW);
  const bodies = await Promise.all(Array.from({ length: 8 }, () => api.request('/v1/counted?page-size=5').then((res) => res.text())));
  t.equal(new Set(bodies).size, 1, 'eight answers alike, so one statement read them');
  t.match(JSON.parse(bodies[0]!), { counted: [{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }, { id: 5 }] });
  const again = await api.request('/v1/counted?page-size=5').then((res) => res.text());
  t.not(again, bodies[0], 'a request after them reads again');

  const offsets = await Promise.all(
    ['/v1/counted?offset=0&limit=5', '/v1/counted?offset=0&limit=5', '/v1/counted?offset=5&limit=5'].map((path) => api.json(path)),
  );
  t.same(offsets[0]!.body, offsets[1]!.body, 'the same offset chunk, with its count, shared');
  t.same(
    offsets[2]!.body.counted.map((item: { id: number }) => item.id),
    [6, 7, 8, 9, 10],
    'another offset reads its own rows',
  );

  const limited = await testApp(t, { registry, rateLimit: true });
  await makeScratch(limited.database.sql, COUNTED_VIEW);
  const remainingOf = (res: Response) => Number(res.headers.get('x-ratelimit-remaining'));
  const alone = await limited.request('/v1/counted?page-size=5');
  const limit = Number(alone.headers.get('x-ratelimit-limit'));
  const cost = limit - remainingOf(alone);
  t.ok(cost > 0, `a request costs ${cost}`);
  // Four at once: the anonymous tier's cap on requests in flight.
  const responses = await Promise.all(Array.from({ length: 4 }, () => limited.request('/v1/counted?page-size=5')));
  t.same(
    responses.map((res) => res.status),
    Array(4).fill(200),
  );
  const items = await Promise.all(
    responses.map(async (res) => ((await res.json()) as { counted: { id: number }[] }).counted.map((item) => item.id)),
  );
  t.same(items, Array(4).fill([1, 2, 3, 4, 5]));
  const after = await limited.request('/v1/counted?page-size=5');
  t.equal(remainingOf(after), limit - 6 * cost, 'each of the six requests charged, shared reads or not');
});

t.test("the request log counts a shared statement's time once: each request its share", async (t) => {
  let raw = '';
  const logger = createLogger({ level: 'info', destination: { write: (text: string) => (raw += text) } });
  const api = await testApp(t, { registry: await registryAhead(t, COUNTED_VIEW, COUNTED_FILE), rateLimit: true, logger });
  // Room for the reads' time: a budget of seconds each.
  await setTier(api.database.sql, 'anonymous', { allowance: 100_000, windowSeconds: 60, concurrency: 8 });
  // 50 ms a read, so that its time stands well above the clock's grain.
  await makeScratch(
    api.database.sql,
    `create sequence counted_reads;
    create view counted as select id::int8 as id, nextval('counted_reads') as n from generate_series(1, 50) as id, (select pg_sleep(0.05)) as slept`,
  );
  const alone = await api.request('/v1/counted?page-size=5');
  t.equal(alone.status, 200);
  await alone.arrayBuffer();
  const together = await Promise.all(Array.from({ length: 4 }, () => api.request('/v1/counted?page-size=5')));
  t.same(await Promise.all(together.map(async (res) => [res.status, (await res.json()).counted.length])), Array(4).fill([200, 5]));
  const lines = logLines(raw).filter((line) => line.path === '/v1/counted');
  t.equal(lines.length, 5);
  const [first, ...shared] = lines as (LogLine & { pgMs?: number; pgShareMs?: number })[];
  t.ok(first!.pgMs! >= 50, `a read alone: its time, ${first!.pgMs} ms`);
  t.equal(first!.pgShareMs, undefined, 'shared with no one: no share');
  // The four usually share one statement; on a busy machine their decisions may come back in two turns, and
  // those of each turn share theirs. A statement's requests are told its whole time, alike.
  const statements = new Map<number, typeof shared>();
  for (const line of shared) statements.set(line.pgMs!, [...(statements.get(line.pgMs!) ?? []), line]);
  t.ok(
    [...statements.values()].some((requests) => requests.length > 1),
    `requests at once share a statement: ${[...statements.values()].map((requests) => requests.length).join(' + ')}`,
  );
  for (const [ms, requests] of statements) {
    t.ok(ms >= 50, `a statement took ${ms} ms, which each of its ${requests.length} requests is told and charged for`);
    for (const line of requests) {
      if (requests.length === 1) t.equal(line.pgShareMs, undefined, 'shared with no one: no share');
      else t.ok(Math.abs(line.pgShareMs! - ms / requests.length) <= 0.01, `its share: ${line.pgShareMs} ms of ${ms}`);
    }
  }
  const shares = shared.reduce((sum, line) => sum + (line.pgShareMs ?? line.pgMs!), 0);
  const ran = [...statements.keys()].reduce((sum, ms) => sum + ms, 0);
  t.ok(Math.abs(shares - ran) <= 0.05, `the shares add up to what PostgreSQL ran: ${shares.toFixed(2)} of ${ran} ms`);
});
