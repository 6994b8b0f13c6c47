// Values at the edges of their types (docs/reference/api.md, "Values"): timestamptz ±infinity, BC and past year 9999
// printed and walked in every variant, cursors positioned at them; a float a real or double precision cannot hold a
// 400 saying the range, a numeric compared exactly; 24:00:00.5 refused; one wording for out-of-range integers;
// NULL intervals, the last date; citext installed off the search path compared as citext.
import t from 'tap';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import { loadRegistry } from '../../lib/pagination/runtime.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';
import { followNext } from '../helpers/walk.ts';

// Rows by id: timestamps RFC 3339 cannot write and the ones beside them, several on one instant.
const STAMPS: [string, string][] = [
  ['infinity', 'infinity'],
  ['-infinity', '-infinity'],
  ['2024-06-01 12:00:00.5+00', '2024-06-01T12:00:00.500000Z'],
  ['infinity', 'infinity'],
  ['0044-03-15 12:00:00+00 BC', '0044-03-15T12:00:00.000000Z BC'],
  ['10000-01-01 00:00:00+00', '10000-01-01T00:00:00.000000Z'],
  ['294276-12-31 23:59:59.999999+00', '294276-12-31T23:59:59.999999Z'],
  // Past year 294246, extract(epoch …) is no longer exact: printed by PostgreSQL instead.
  ['294247-06-01 00:00:00.123456+00', '294247-06-01T00:00:00.123456Z'],
  ['4714-11-24 00:00:00+00 BC', '4714-11-24T00:00:00.000000Z BC'],
  ['-infinity', '-infinity'],
  ['0001-12-31 23:59:59.999999+00 BC', '0001-12-31T23:59:59.999999Z BC'],
  ['0001-01-01 00:00:00+00', '0001-01-01T00:00:00.000000Z'],
  ['9999-12-31 23:59:59.999999+00', '9999-12-31T23:59:59.999999Z'],
  ['2024-06-01 12:00:00.5+00', '2024-06-01T12:00:00.500000Z'],
  ['infinity', 'infinity'],
];

const DDL = `
  create schema scratch;
  create schema ext;
  create extension citext with schema ext;
  create table scratch.stamps (
    id bigint primary key, at timestamptz not null, day date, span interval, r real, d double precision, amount numeric,
    clock time, ci ext.citext);
  create index stamps_at on scratch.stamps (at, id);
  insert into scratch.stamps (id, at) values ${STAMPS.map(([literal], at) => `(${at + 1}, '${literal}')`).join(', ')};
  update scratch.stamps set
    day = case id when 1 then date '5874897-12-31' when 2 then date '294277-01-01' when 3 then date '4714-11-24 BC' end,
    span = case when id = 1 then interval '1 day' end, r = case when id = 1 then 1.5 end,
    d = case when id = 1 then float8 '5e-324' end, amount = case id when 1 then 1e400 when 2 then 1 end,
    clock = case when id = 1 then time '24:00:00' end,
    ci = case id when 1 then 'Hello' when 2 then 'HELLO' when 3 then 'hello' when 4 then 'world' end::ext.citext;
  analyze scratch.stamps;
`;

const FILE = `
collections:
  - relation: scratch.stamps
    filters: { r: [eq, lt, gt, in], d: [eq, gt], amount: [eq, gt], clock: [eq], ci: [eq, prefix, in] }
    sort: [at, ci]
    unindexedSorts: true
    variants: [offset, page, cursor, time]
    timeColumn: at
  - relation: scratch.stamps
    name: stamps_by_time
    columns: [id, at]
    variants: [time]
    timeColumn: at
`;

interface Item {
  id: number;
  at: string;
  [field: string]: unknown;
}

t.test('values at the edges of their types', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(DDL).simple();
  const registry = await loadRegistry(database.sql, FILE, 'collections.yaml', { schemas: ['scratch'], serviceSchema: 'service' });
  const config = parseConfig({ ADMIN_TOKEN });
  const secret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  const logged: unknown[] = [];
  const app = buildApp({ database, config, registry, cursorSecret: secret, rateLimit: false, log: (error) => logged.push(error) });
  const get = async (path: string) => {
    const res = await app.request(`http://test.local${path}`);
    return { status: res.status, body: (await res.json()) as any };
  };
  const walk = async (first: string) =>
    (await followNext(first, get, 100)).flatMap((chunk) => (chunk.stamps ?? chunk.stamps_by_time) as Item[]);
  const ids = (items: Item[]) => items.map((item) => item.id);
  /** The ids in SQL's order of `at` and id, each way. */
  const sqlIds = async (order: 'asc' | 'desc', where = 'true') =>
    (await database.sql.unsafe(`select id from scratch.stamps where ${where} order by at ${order}, id ${order}`)).map((row) =>
      Number(row.id),
    );

  t.test('timestamptz: ±infinity, BC and years past 9999 printed as date and timestamp print them, in every variant', async (t) => {
    const { status, body } = await get('/v1/stamps?limit=100&sort=at');
    t.equal(status, 200);
    const printed = new Map((body.stamps as Item[]).map((item) => [item.id, item.at]));
    for (const [at, [literal, expected]] of STAMPS.entries()) t.equal(printed.get(at + 1), expected, `${literal} prints as ${expected}`);
    // PostgreSQL's own printing of the same instants, in UTC: the same text.
    const rows = await database.sql`
      select id, case when not isfinite(at) then at::text
        when at < timestamptz '0001-01-01Z' then to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z BC"')
        else to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') end as text from scratch.stamps`;
    t.same(new Map(rows.map((row) => [Number(row.id), row.text])), printed, 'every one as to_char writes it in UTC');
    t.same(logged, [], 'nothing failed');
  });

  t.test('walks over them: -infinity first and infinity last ascending, cursors positioned at each continue', async (t) => {
    const ascending = await sqlIds('asc');
    const descending = await sqlIds('desc');
    t.same(ascending.slice(0, 2), [2, 10], '-infinity first');
    t.same(ascending.slice(-3), [1, 4, 15], 'infinity last');
    for (const size of [1, 2, 4]) {
      t.same(ids(await walk(`/v1/stamps?limit=${size}&sort=at`)), ascending, `offset, limit=${size}`);
      t.same(ids(await walk(`/v1/stamps?page=0&page-size=${size}&sort=-at`)), descending, `page, page-size=${size}, newest first`);
      t.same(ids(await walk(`/v1/stamps?page-size=${size}&sort=at`)), ascending, `cursor, page-size=${size}`);
      t.same(ids(await walk(`/v1/stamps?page-size=${size}&sort=-at`)), descending, `cursor, page-size=${size}, newest first`);
      t.same(
        ids(await walk(`/v1/stamps?page-size=${size}&before=9999-12-31T23:59:59.999999Z`)),
        await sqlIds('desc', `at < '9999-12-31T23:59:59.999999Z'`),
        `time before, page-size=${size}`,
      );
      t.same(
        ids(await walk(`/v1/stamps?page-size=${size}&after=0001-01-01T00:00:00Z`)),
        await sqlIds('asc', `at > '0001-01-01Z'`),
        `time after, page-size=${size}`,
      );
    }
    // The time variant with no marker: newest first, infinity the newest, -infinity the oldest.
    t.same(ids(await walk('/v1/stamps_by_time?page-size=3')), descending, 'time, newest first');

    // Oldest first after the year 2024: the infinite rows last; then poll, and back along prev and next to -infinity.
    const after = await followNext('/v1/stamps?page-size=2&after=2024-01-01T00:00:00Z', get);
    t.same(
      after.flatMap((chunk) => ids(chunk.stamps)),
      await sqlIds('asc', `at > '2024-01-01Z'`),
      'after: up to the infinite rows',
    );
    const last = after.at(-1)!;
    const path = (href: string) => new URL(href).pathname + new URL(href).search;
    t.ok(last._links.poll, 'the last chunk polls');
    t.same((await get(path(last._links.poll.href))).body.stamps, [], 'nothing is newer than infinity');
    const back = (await followNext(path(last._links.prev.href), get)).flatMap((chunk) => ids(chunk.stamps));
    t.same(back, descending.slice(descending.indexOf(last.stamps[0].id) + 1), 'prev, then next, from the infinite rows to -infinity');
  });

  t.test('real and double precision: a value they cannot hold is a 400 saying the range; numeric compares exactly', async (t) => {
    const realRange = 'must be within the range of real: a magnitude from 1.4e-45 to 3.4028235e+38, 0, NaN, Infinity or -Infinity';
    const doubleRange =
      'must be within the range of double precision: a magnitude from 4.9e-324 to 1.7976931348623157e+308, 0, NaN, Infinity or -Infinity';
    const refused: [string, string, string][] = [
      ['r=1e400', 'r', realRange],
      ['r[lt]=1e400', 'r[lt]', realRange],
      ['r[gt]=-1e39', 'r[gt]', realRange],
      ['r=1e-400', 'r', realRange],
      ['r=1e-46', 'r', realRange],
      ['r[in]=1,3.4028236e38', 'r[in]', realRange],
      ['d=1e400', 'd', doubleRange],
      ['d[gt]=1e400', 'd[gt]', doubleRange],
      ['d=1e-400', 'd', doubleRange],
      ['d=2e-324', 'd', doubleRange],
      ['clock=24:00:00.5', 'clock', 'must be a time, HH:MM[:SS[.ffffff]]'],
      ['clock=24:00:00.000001', 'clock', 'must be a time, HH:MM[:SS[.ffffff]]'],
    ];
    for (const [query, name, reason] of refused) {
      const { status, body } = await get(`/v1/stamps?${query}`);
      t.equal(status, 400, query);
      t.same(body.invalid_params, [{ name, reason }], `${query}: names ${name}, says the range`);
    }
    const taken: [string, number[]][] = [
      ['r=1.5', [1]],
      ['r[lt]=3.4028235e38', [1]],
      ['r=1e-45', []],
      ['r=0e-400', []],
      ['r=-0', []],
      ['d=5e-324', [1]],
      ['d=3e-324', [1]],
      ['d[gt]=-1.7976931348623157e308', [1]],
      ['d=Infinity', []],
      ['amount=1e400', [1]],
      ['amount[gt]=1e399', [1]],
      ['amount[gt]=1e9999', []],
      ['amount=1e-9999', []],
      ['clock=24:00:00', [1]],
      ['clock=24:00:00.000000', [1]],
    ];
    for (const [query, expected] of taken) {
      const { status, body } = await get(`/v1/stamps?limit=100&${query}`);
      t.equal(status, 200, query);
      t.same(
        ids(body.stamps ?? []).sort((a, b) => a - b),
        expected,
        `${query}: the rows SQL gives`,
      );
    }
  });

  t.test('one wording for every out-of-range integer parameter', async (t) => {
    const cases: [string, string, string][] = [
      ['page-size=5&since_id=-5', 'since_id', 'must be an integer from 0 to 9223372036854775807'],
      ['page-size=5&since_id=9223372036854775808', 'since_id', 'must be an integer from 0 to 9223372036854775807'],
      ['page-size=5&since_id=1.5', 'since_id', 'must be an integer from 0 to 9223372036854775807'],
      ['limit=0', 'limit', 'must be an integer from 1 to 100'],
      ['limit=-1', 'limit', 'must be an integer from 1 to 100'],
      ['offset=-1', 'offset', 'must be an integer from 0 to 9007199254740991'],
      ['page=-1', 'page', 'must be an integer from 0 to 9007199254740991'],
      ['page=9007199254740991&page-size=20', 'page', 'must be an integer from 0 to 450359962737049 with page-size 20'],
      ['page-size=101', 'page-size', 'must be an integer from 1 to 100'],
    ];
    for (const [query, name, reason] of cases) {
      const { status, body } = await get(`/v1/stamps?${query}`);
      t.equal(status, 400, query);
      t.same(body.invalid_params, [{ name, reason }], query);
    }
    t.same(ids((await get('/v1/stamps?page-size=3&since_id=13')).body.stamps), [14, 15], 'since_id=13 reads on');
  });

  t.test('the last date, a NULL interval, citext off the search path', async (t) => {
    const all = (await get('/v1/stamps?limit=100')).body.stamps as Item[];
    const first = all.find((item) => item.id === 1)!;
    t.equal(first.day, '5874897-12-31', 'the last date PostgreSQL holds (past what to_char reads)');
    t.equal(all.find((item) => item.id === 2)!.day, '294277-01-01', 'the first day past the timestamps');
    t.equal(all.find((item) => item.id === 3)!.day, '4714-11-24 BC', 'the first date');
    t.equal(first.span, 'P0Y0M1DT0H0M0.000000S');
    t.equal(all.find((item) => item.id === 2)!.span, null, 'a NULL interval is null');
    t.same(ids((await get('/v1/stamps?ci=hello')).body.stamps).sort(), [1, 2, 3], 'citext equality, case-insensitive');
    t.same(ids((await get('/v1/stamps?ci[prefix]=HEL')).body.stamps).sort(), [1, 2, 3], 'and its prefix');
    t.same(ids((await get('/v1/stamps?ci[in]=HELLO,World')).body.stamps).sort(), [1, 2, 3, 4], 'and in');
    const walked = ids(await walk('/v1/stamps?page-size=1&sort=ci&ci[prefix]=h'));
    t.same(walked, [1, 2, 3], 'a walk by citext, one item a chunk, skips none of the equal values');
  });
});
