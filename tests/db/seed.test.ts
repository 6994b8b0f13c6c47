// The demo data generator: deterministic, sized as asked, indexes kept, and events bunched on shared timestamps.
import type { Sql, TransactionSql } from 'postgres';
import t from 'tap';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { type SeedTable, seedTable, seedTables } from '../../demo/seed.ts';
import { parseSeedArgs } from '../../scripts/seed.ts';
import { testApp } from '../helpers/app.ts';
import { scratchSession, testDatabase, withSession } from '../helpers/db.ts';
import { sleep } from '../helpers/wait.ts';

const sizes: Record<SeedTable, number> = { products: 3_000, orders: 2_000, events: 5_000 };

/** One hash over every column of every row, in id order: equal hashes mean equal tables. */
async function tableHash(sql: Sql | TransactionSql, table: SeedTable): Promise<string> {
  const [row] = await sql`select md5(coalesce(string_agg(t::text, E'\n' order by t.id), '')) as hash from demo.${sql(table)} t`;
  return row!.hash as string;
}

/**
 * What the generator makes for `sizes`, as tableHash reads it in UTC: hashed from the generator as it was
 * when docs/reference/api.md's examples were taken (a Date per row), so a faster generator must make the same rows.
 */
const GENERATED: Record<SeedTable, string> = {
  products: 'ca5d3eab04897fe621ce93e80b21e671',
  orders: 'eb04d2f2372698f9a46bbbdba2621935',
  events: 'cbe14f824f1ef49bbddc6de26b1399f5',
};

/** tableHash with timestamps printed in ISO style and UTC, whatever the server's DateStyle and TimeZone. */
function utcTableHash(sql: Sql, table: SeedTable): Promise<string> {
  return sql.begin(async (tx) => {
    await tx`set local timezone = 'UTC'`;
    await tx`set local datestyle = 'ISO, MDY'`;
    return tableHash(tx, table);
  });
}

async function indexNames(sql: Sql, table: SeedTable): Promise<string[]> {
  const rows = await sql`select indexname from pg_indexes where tablename = ${table} order by indexname`;
  return rows.map((row) => row.indexname as string);
}

t.test('the same seed gives the same rows in two fresh databases', async (t) => {
  const first = await testDatabase(t);
  const second = await testDatabase(t);
  for (const table of seedTables) {
    await seedTable(first.sql, table, sizes[table]);
    await seedTable(second.sql, table, sizes[table]);
    t.equal(await tableHash(first.sql, table), await tableHash(second.sql, table), table);
    t.equal(await utcTableHash(first.sql, table), GENERATED[table], `${table}: the rows the examples were taken from`);
  }
  t.not(await tableHash(first.sql, 'products'), await tableHash(first.sql, 'orders'), 'tables differ from each other');
});

t.test('sizes are honoured: exactly N rows, ids 1..N, replacing what was there', async (t) => {
  const { sql } = await testDatabase(t);
  for (const table of seedTables) {
    const reported: number[] = [];
    await seedTable(sql, table, sizes[table], (done) => reported.push(done));
    const [before] = await sql`select count(*)::int as n, min(id)::int as lo, max(id)::int as hi from demo.${sql(table)}`;
    t.same(before, { n: sizes[table], lo: 1, hi: sizes[table] }, `${table}: first load`);
    t.equal(reported.at(-1), sizes[table], `${table}: progress ends at the total`);

    // A reseed replaces the rows and restarts the ids, whatever was there.
    await seedTable(sql, table, 7);
    const [after] = await sql`select count(*)::int as n, min(id)::int as lo, max(id)::int as hi from demo.${sql(table)}`;
    t.same(after, { n: 7, lo: 1, hi: 7 }, `${table}: reseeded`);
    await seedTable(sql, table, 0);
    const [empty] = await sql`select count(*)::int as n from demo.${sql(table)}`;
    t.equal(empty!.n, 0, `${table}: zero rows`);
  }
});

t.test('seeding keeps every index of the table', async (t) => {
  const { sql } = await testDatabase(t);
  for (const table of seedTables) {
    const before = await indexNames(sql, table);
    await seedTable(sql, table, 500);
    t.same(await indexNames(sql, table), before, table);
  }
});

t.test('events: many items share one timestamp', async (t) => {
  const { sql } = await testDatabase(t);
  await seedTable(sql, 'events', sizes.events);
  const [row] = await sql`
    select count(*)::int as shared_timestamps, coalesce(max(n), 0)::int as largest, coalesce(sum(n), 0)::int as items
    from (select count(*) as n from demo.events group by occurred_at having count(*) > 1) bursts`;
  t.ok(row!.largest >= 50, `the largest burst has ${row!.largest} items on one timestamp`);
  t.ok(row!.shared_timestamps >= 10, `${row!.shared_timestamps} timestamps are shared`);
  t.ok(row!.items >= sizes.events / 10, `${row!.items} of ${sizes.events} items share their timestamp`);
});

t.test('npm run seed arguments: sizes per collection; anything else is one clear error', async (t) => {
  t.same(parseSeedArgs(['--products', '1000000', '--events=5']), [
    ['products', 1_000_000],
    ['events', 5],
  ]);
  t.same(parseSeedArgs(['--orders', '1_000']), [['orders', 1_000]]);
  t.throws(() => parseSeedArgs([]), /Nothing to seed/);
  t.throws(() => parseSeedArgs(['--users', '5']), /Unknown option '--users'/);
  t.throws(() => parseSeedArgs(['--products']), /argument missing/);
  t.throws(() => parseSeedArgs(['--products=-1']), /Invalid --products/);
  t.throws(() => parseSeedArgs(['--products', '-1']), /^Invalid arguments: Option '--products' argument is ambiguous$/);
  t.throws(() => parseSeedArgs(['--products', '1e6']), /Invalid --products/);
  t.throws(() => parseSeedArgs(['products']), /Unexpected argument/);
});

/** Everything the migrations define about a table, as catalog text: equal shapes mean the same table. */
async function tableShape(sql: Sql, table: SeedTable): Promise<Record<string, unknown>> {
  const [relation] = await sql`
    select c.relowner::regrole::text as owner, c.relacl::text[] as acl, c.reloptions, n.nspname as schema
    from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = ${`demo.${table}`}::regclass`;
  const columns = await sql`
    select attname, format_type(atttypid, atttypmod) as type, attnotnull, attidentity,
      pg_get_expr(d.adbin, d.adrelid) as default
    from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
    where a.attrelid = ${`demo.${table}`}::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum`;
  const indexes = await sql`
    select indexrelid::regclass::text as name, pg_get_indexdef(indexrelid) as definition
    from pg_index where indrelid = ${`demo.${table}`}::regclass order by 1`;
  const constraints = await sql`
    select conname, pg_get_constraintdef(oid) as definition from pg_constraint where conrelid = ${`demo.${table}`}::regclass order by 1`;
  const sequences = await sql`
    select s.seqrelid::regclass::text as name, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle
    from pg_depend d join pg_sequence s on s.seqrelid = d.objid
    where d.refobjid = ${`demo.${table}`}::regclass and d.classid = 'pg_class'::regclass order by 1`;
  return { ...relation, columns: [...columns], indexes: [...indexes], constraints: [...constraints], sequences: [...sequences] };
}

t.test('a seed swaps in a table exactly like the one the migrations made: indexes, constraints, identity, owner, grants', async (t) => {
  const { sql, url } = await testDatabase(t);
  const role = `seed_reader_${process.pid}`;
  await sql.unsafe(`create role ${role} nologin`).catch(() => {}); // left over from a killed run
  t.teardown(() =>
    withSession(url, async (admin) => {
      await admin.unsafe(`drop owned by ${role}`).catch(() => {});
      await admin.unsafe(`drop role if exists ${role}`);
    }),
  );
  for (const table of seedTables) {
    await sql.unsafe(`grant select on demo.${table} to ${role}`);
    const before = await tableShape(sql, table);
    await seedTable(sql, table, 300);
    t.same(await tableShape(sql, table), before, `${table}: the same table after a seed`);
    await seedTable(sql, table, 20);
    t.same(await tableShape(sql, table), before, `${table}: and after a second`);
  }
  const [leftovers] = await sql`select count(*)::int as n from pg_class where relname like '%seed%' and relkind in ('r', 'S', 'i')`;
  t.equal(leftovers!.n, 0, 'no staging table, index or sequence is left behind');
  const [schemas] = await sql`select count(*)::int as n from pg_namespace where nspname like 'seed%'`;
  t.equal(schemas!.n, 0, 'no staging schema is left behind');
  // The migrations' own record is untouched: running them again is a no-op that succeeds.
  const applied = await sql`select hash from demo.__drizzle_migrations order by id`;
  await runMigrations(url);
  await migrateDemo(url);
  t.same(await sql`select hash from demo.__drizzle_migrations order by id`, applied, 'drizzle migration state unchanged');
});

t.test('after a seed, rows inserted with plain SQL get the next ids', async (t) => {
  const { sql } = await testDatabase(t);
  await seedTable(sql, 'products', 1_000);
  const [row] = await sql`insert into demo.products (name, category, price_cents) values ('Plain Insert', 'tools', 500) returning id::int`;
  t.equal(row!.id, 1_001);
  await seedTable(sql, 'products', 10);
  const [again] =
    await sql`insert into demo.products (name, category, price_cents) values ('Plain Insert', 'tools', 500) returning id::int`;
  t.equal(again!.id, 11, 'ids restart with each seed, and go on from its last row');
});

t.test('a reseed of a live table never blocks its readers: they wait milliseconds, not the whole load', async (t) => {
  const { sql, url } = await testDatabase(t);
  await seedTable(sql, 'products', 1_000);
  const reader = scratchSession(t, url);
  // Connected and prepared before the seed starts: what is measured is waiting, not connecting.
  await reader`select id, name from demo.products limit 1`;
  let running = true;
  let longest = 0;
  let reads = 0;
  const readLoop = (async () => {
    while (running) {
      const started = performance.now();
      await reader`select id, name from demo.products limit 1`;
      longest = Math.max(longest, performance.now() - started);
      reads++;
      await sleep(5);
    }
  })();
  const started = performance.now();
  await seedTable(sql, 'products', 200_000);
  const seconds = (performance.now() - started) / 1000;
  running = false;
  await readLoop;
  t.comment(`seed of 200,000 rows: ${seconds.toFixed(1)} s; ${reads} reads, the longest ${Math.round(longest)} ms`);
  t.ok(reads > 20, `the reader kept reading during the seed (${reads} reads)`);
  t.ok(longest < 500, `no read waited 0.5 s or more (longest ${Math.round(longest)} ms)`);
  const [after] = await reader`select count(*)::int as n, max(id)::int as hi from demo.products`;
  t.same(after, { n: 200_000, hi: 200_000 }, 'the reader sees the new rows');
});

t.test('the service serves the swapped table, with statements prepared before the swap', async (t) => {
  const app = await testApp(t, { seed: { products: 50 } });
  const first = await app.json('/v1/products?count=exact');
  t.equal(first.status, 200);
  await seedTable(app.database.sql, 'products', 7);
  const second = await app.json('/v1/products?count=exact');
  t.equal(second.status, 200, JSON.stringify(second.body));
  t.same(
    second.body.products.map((item: { id: number }) => item.id),
    [1, 2, 3, 4, 5, 6, 7],
    'the new rows',
  );
});
