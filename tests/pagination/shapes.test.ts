// Prepared queries per shape: one named statement per shape and connection, planned once (a generic plan)
// however many times and with whatever values it runs; a bounded cache; a bounded number of named statements.
import t, { type Test } from 'tap';
import { type Database, openDatabase } from '../../db/client.ts';
import { demoRegistry } from '../../demo/collections.ts';
import { seedTable } from '../../demo/seed.ts';
import { Lru } from '../../lib/pagination/lru.ts';
import type { Registry } from '../../lib/pagination/registry.ts';
import { NAMED_SHAPES, SHAPE_CACHE_SIZE } from '../../lib/pagination/shapes.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { makeScratch, scratchRegistry } from '../helpers/collections.ts';
import { testDatabase } from '../helpers/db.ts';

interface Prepared {
  statement: string;
  generic_plans: number;
  custom_plans: number;
}

/** The app over a pool of ONE connection, so that pg_prepared_statements (per session) sees every statement. */
async function oneConnectionApp(t: Test, registry: Registry = demoRegistry()) {
  const db = await testDatabase(t);
  await seedTable(db.sql, 'products', 3000);
  await seedTable(db.sql, 'orders', 3000);
  await seedTable(db.sql, 'events', 3000);
  const database = openDatabase(db.url, { max: 1 });
  t.teardown(() => database.close());
  const app = buildApp({ database, config: parseConfig({}), registry, cursorSecret: 'x'.repeat(32), log: () => {} });
  const get = async (path: string) => {
    const res = await app.request(`http://test.local${path}`);
    const body = (await res.json()) as Record<string, any>;
    return { status: res.status, body };
  };
  const prepared = async () =>
    (await database.sql`select statement, generic_plans::int, custom_plans::int from pg_prepared_statements`) as unknown as Prepared[];
  return { db, database, get, prepared };
}

/** The statements that appeared since `before`. */
function added(before: Prepared[], after: Prepared[]): Prepared[] {
  const known = new Set(before.map((row) => row.statement));
  return after.filter((row) => !known.has(row.statement));
}

t.test('a repeated shape is one named statement per connection, planned once: generic plans, not one per call', async (t) => {
  const { get, prepared, database } = await oneConnectionApp(t);
  // Each case: paths of ONE shape (values differ), and whether PostgreSQL should settle on the generic plan.
  // Cursors at twenty positions of a sort, collected with page-size=10 (another shape).
  const cursorsOf = async (sort: string) => {
    const cursors: string[] = [];
    let next: string | undefined = `/v1/products?page-size=10&sort=${sort}`;
    while (next && cursors.length < 20) {
      const { body } = await get(next);
      next = body._links.next?.href.replace('http://test.local', '');
      if (next) cursors.push(new URL(next, 'http://test.local').searchParams.get('cursor')!);
    }
    return cursors;
  };
  const [{ server_version_num: version }] =
    (await database.sql`select current_setting('server_version_num')::int as server_version_num`) as unknown as [
      { server_version_num: number },
    ];
  const oneWay = await cursorsOf('priceCents');
  const mixed = await cursorsOf('-priceCents,name');
  // Each case: paths of ONE shape (values differ), and whether PostgreSQL should settle on the generic plan.
  const cases: { label: string; paths: (i: number) => string; generic: boolean }[] = [
    { label: 'first cursor chunk', paths: () => '/v1/products?page-size=20&sort=priceCents', generic: true },
    { label: 'cursor chunks at twenty positions', paths: (i) => `/v1/products?page-size=11&cursor=${oneWay[i]}`, generic: true },
    {
      // Parsed once too, but planned for its values on every call: PostgreSQL prices the generic plan of the
      // expanded condition (price_cents <= $1 and (price_cents < $2 or …)) with default selectivities, dearer
      // than the plans for the values, so it keeps planning per call, as it did for every query before shapes.
      label: 'cursor chunks at twenty positions, mixed directions',
      paths: (i) => `/v1/products?page-size=11&cursor=${mixed[i]}`,
      generic: false,
    },
    {
      label: 'filtered first chunk, values changing',
      paths: (i) => `/v1/orders?page-size=10&status=${['paid', 'pending', 'shipped'][i % 3]}&totalCents[gt]=${i * 37}`,
      // PostgreSQL 15 settles on the generic plan; 18 (the embedded default) prices it above the plans for the
      // values of this two-filter query and plans every call (seen: 0 generic of 20), parsing it once all the same.
      generic: version < 180000,
    },
    { label: 'since_id, a position on id', paths: (i) => `/v1/products?since_id=${i * 50}&page-size=15`, generic: true },
    {
      label: 'in lists of any length: one array parameter',
      paths: (i) => `/v1/events?page-size=5&type[in]=${['login', 'click', 'purchase', 'logout', 'view'].slice(0, 1 + (i % 5)).join(',')}`,
      generic: true,
    },
    {
      label: 'time variant, before a timestamp',
      paths: (i) => `/v1/events?before=2030-01-0${1 + (i % 9)}T00:00:00Z&page-size=7`,
      generic: true,
    },
    { label: 'first offset chunk, count=none', paths: () => '/v1/products?limit=20&count=none&sort=-name', generic: true },
    {
      label: 'count=exact of a filter',
      paths: (i) => `/v1/products?limit=3&category=${['books', 'toys'][i % 2]}&count=exact`,
      generic: false,
    },
  ];
  const CALLS = 20;
  for (const c of cases) {
    const before = await prepared();
    for (let i = 0; i < CALLS; i++) {
      const { status, body } = await get(c.paths(i));
      t.equal(status, 200, `${c.label} #${i}: ${JSON.stringify(body).slice(0, 200)}`);
    }
    const mine = added(before, await prepared());
    // count=exact runs two shapes (the chunk and the count); every other case one.
    const shapes = c.label.startsWith('count=exact') ? 2 : 1;
    t.equal(mine.length, shapes, `${c.label}: ${shapes} named statement(s) for ${CALLS} calls`);
    for (const row of mine) {
      t.equal(row.generic_plans + row.custom_plans, CALLS, `${c.label}: every call ran the named statement (${row.statement})`);
      if (c.generic) {
        // PostgreSQL plans the first five executions for their values, then keeps the generic plan if it costs no more.
        t.ok(row.custom_plans <= 5 && row.generic_plans >= CALLS - 5, `${c.label}: planned once, then reused (${JSON.stringify(row)})`);
      }
    }
  }
  // Running every case again adds no statement.
  const settled = await prepared();
  for (const c of cases) for (let i = 0; i < 3; i++) await get(c.paths(i + 100));
  t.same(added(settled, await prepared()), [], 'the shapes seen already prepare nothing new');
});

t.test('count=estimated: one prepared EXPLAIN per filter shape, planned for its values on each call', async (t) => {
  const { get, prepared } = await oneConnectionApp(t);
  const before = await prepared();
  const sizes = new Set<number>();
  for (let i = 0; i < 10; i++) {
    const { status, body } = await get(`/v1/products?page=0&count=estimated&priceCents[lt]=${(i + 1) * 1000}`);
    t.equal(status, 200);
    sizes.add(body.totalPages);
  }
  const mine = added(before, await prepared());
  t.equal(mine.filter((row) => row.statement.startsWith('explain')).length, 1, 'one EXPLAIN statement');
  t.ok(sizes.size > 1, `the estimate follows the values (${[...sizes].join(', ')} pages)`);
});

t.test('in lists: quotes, backslashes, braces, commas-in-braces and NULL are values, matched exactly', async (t) => {
  const { database, get } = await oneConnectionApp(t);
  const odd = ['NULL', 'a"b', 'c\\d', '{e} f', 'g h', "it's"];
  for (const status of odd) await database.sql`insert into demo.orders (customer_id, status, total_cents) values (424242, ${status}, 1)`;
  const { status, body } = await get(`/v1/orders?customerId=424242&status[in]=${encodeURIComponent(odd.join(','))}&page-size=20`);
  t.equal(status, 200);
  t.same(body.orders.map((order: { status: string }) => order.status).sort(), [...odd].sort());
  const one = await get(`/v1/orders?customerId=424242&status[in]=${encodeURIComponent('NULL,zzz')}&page-size=20`);
  t.same(
    one.body.orders.map((order: { status: string }) => order.status),
    ['NULL'],
    'the text NULL, not a null element',
  );
});

t.test(`past ${NAMED_SHAPES} shapes, new shapes run unnamed: statements per connection stay bounded, answers the same`, async (t) => {
  const { get, prepared } = await oneConnectionApp(t);
  const before = (await prepared()).length;
  const sorts = ['id', '-id', 'name', '-name', 'priceCents', '-priceCents', 'createdAt', '-createdAt'];
  // Distinct shapes: every page size with every sort.
  const paths = sorts.flatMap((sort) => Array.from({ length: 100 }, (_, at) => `/v1/products?page-size=${at + 1}&sort=${sort}`));
  t.ok(paths.length > NAMED_SHAPES + 100, `${paths.length} shapes`);
  const first = await get(paths[0]!);
  for (const path of paths.slice(1)) {
    const { status } = await get(path);
    if (status !== 200) t.fail(`${path}: ${status}`);
  }
  const statements = (await prepared()).length - before;
  t.equal(statements, NAMED_SHAPES, `${NAMED_SHAPES} named statements on the connection, not ${paths.length}`);
  // The first shape has long left the cache (of SHAPE_CACHE_SIZE) but keeps its name: no new statement, same chunk.
  t.ok(paths.length - 1 > SHAPE_CACHE_SIZE, 'the first shape was evicted from the cache');
  const again = await get(paths[0]!);
  t.same(again.body, first.body, 'the first shape again: the same chunk');
  const last = await get(paths.at(-1)!);
  t.equal(last.status, 200, 'an unnamed shape still answers');
  t.equal((await prepared()).length - before, NAMED_SHAPES, 'and no statement was added');
});

// Tables without the constraints of the demo tables: a collection over one can hold what RFC 3339 cannot write.
const STAMP_TABLES = `
  create table unchecked_stamps (id bigint primary key, at timestamptz not null);
  create table other_stamps (id bigint primary key, at timestamptz not null);`;

t.test('a timestamp RFC 3339 cannot write is printed as date and timestamp print theirs, in every shape', async (t) => {
  const db = await testDatabase(t);
  await makeScratch(db.sql, STAMP_TABLES);
  const stamps = await scratchRegistry(
    db.sql,
    `
collections:
  - relation: scratch.unchecked_stamps
    name: stamps
    variants: [offset, cursor]
    defaultVariant: offset
    filters: { id: [eq] }
    sort: [id]
    order: id
`,
  );
  const odd: [string, string][] = [
    ['infinity', 'infinity'],
    ['-infinity', '-infinity'],
    ['10000-01-01T00:00:00Z', '10000-01-01T00:00:00.000000Z'],
    ['0044-03-15 12:00:00+00 BC', '0044-03-15T12:00:00.000000Z BC'],
    ['0001-12-31 23:59:59.999999+00 BC', '0001-12-31T23:59:59.999999Z BC'],
  ];
  await db.sql`insert into scratch.unchecked_stamps values (1, '2025-01-01T00:00:00.5Z')`;
  for (const [at, [value]] of odd.entries()) await db.sql`insert into scratch.unchecked_stamps values (${at + 2}, ${value}::timestamptz)`;
  const logged: unknown[] = [];
  const app = buildApp({
    database: db as Database,
    config: parseConfig({}),
    registry: stamps,
    cursorSecret: 'x'.repeat(32),
    log: (error) => logged.push(error),
  });
  const get = async (path: string) => {
    const res = await app.request(`http://test.local${path}`);
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const good = await get('/v1/stamps?id=1');
  t.equal(good.status, 200);
  t.same(good.body.stamps, [{ id: 1, at: '2025-01-01T00:00:00.500000Z' }]);
  for (const [at, [value, printed]] of odd.entries()) {
    for (const path of [`/v1/stamps?id=${at + 2}`, `/v1/stamps?page-size=1&since_id=${at + 1}`]) {
      const chunk = await get(path);
      t.equal(chunk.status, 200, `${value} (${path}): a 200`);
      t.same(chunk.body.stamps, [{ id: at + 2, at: printed }], `printed as ${printed}`);
    }
  }
  t.same(logged, [], 'nothing failed');
});

t.test('the LRU keeps the entries used last', async (t) => {
  const lru = new Lru<string, number>(3);
  lru.set('a', 1);
  lru.set('b', 2);
  lru.set('c', 3);
  t.equal(lru.get('a'), 1, 'a read moves a to the end');
  lru.set('d', 4);
  t.equal(lru.size, 3);
  t.equal(lru.get('b'), undefined, 'b, used least recently, is gone');
  t.same([lru.get('a'), lru.get('c'), lru.get('d')], [1, 3, 4]);
  lru.set('c', 30);
  lru.set('e', 5);
  t.equal(lru.get('a'), undefined, 'a is gone after c and d were read and c set again');
  t.same([lru.get('c'), lru.get('d'), lru.get('e')], [30, 4, 5]);
});

t.test('the shape cache tells apart collections of the same name over different tables', async (t) => {
  // Two registries whose "things" differ: each app must read its own table, though the names are the same.
  const db = await testDatabase(t);
  await makeScratch(db.sql, STAMP_TABLES);
  const things = (table: string) =>
    scratchRegistry(db.sql, `collections: [{relation: scratch.${table}, name: things, variants: [cursor], filters: {}, sort: [id]}]`);
  await db.sql`insert into scratch.unchecked_stamps values (1, '2025-01-01T00:00:00Z')`;
  await db.sql`insert into scratch.other_stamps values (2, '2026-01-01T00:00:00Z')`;
  const registries = [await things('unchecked_stamps'), await things('other_stamps')];
  const apps = registries.map((registry) =>
    buildApp({
      database: db as Database,
      config: parseConfig({}),
      registry,
      cursorSecret: 'x'.repeat(32),
      log: () => {},
    }),
  );
  const ids = [];
  for (const app of apps) {
    const res = await app.request('http://test.local/v1/things?page-size=5');
    ids.push(((await res.json()) as { things: { id: number }[] }).things.map((thing) => thing.id));
  }
  t.same(ids, [[1], [2]]);
});
