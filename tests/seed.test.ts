// The demo data generator: deterministic, sized as asked, indexes kept, and events bunched on shared timestamps.
import t from 'tap';
import type { Sql } from 'postgres';
import { seedTable, seedTables, type SeedTable } from '../db/seed.ts';
import { parseSeedArgs } from '../scripts/seed.ts';
import { testDatabase } from './helpers/db.ts';

const sizes: Record<SeedTable, number> = { products: 3_000, orders: 2_000, events: 5_000 };

/** One hash over every column of every row, in id order: equal hashes mean equal tables. */
async function tableHash(sql: Sql, table: SeedTable): Promise<string> {
  const [row] = await sql`select md5(coalesce(string_agg(t::text, E'\n' order by t.id), '')) as hash from ${sql(table)} t`;
  return row!.hash as string;
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
  }
  t.not(await tableHash(first.sql, 'products'), await tableHash(first.sql, 'orders'), 'tables differ from each other');
});

t.test('sizes are honoured: exactly N rows, ids 1..N, replacing what was there', async (t) => {
  const { sql } = await testDatabase(t);
  for (const table of seedTables) {
    const reported: number[] = [];
    await seedTable(sql, table, sizes[table], (done) => reported.push(done));
    const [before] = await sql`select count(*)::int as n, min(id)::int as lo, max(id)::int as hi from ${sql(table)}`;
    t.same(before, { n: sizes[table], lo: 1, hi: sizes[table] }, `${table}: first load`);
    t.equal(reported.at(-1), sizes[table], `${table}: progress ends at the total`);

    // A reseed replaces the rows and restarts the ids, whatever was there.
    await seedTable(sql, table, 7);
    const [after] = await sql`select count(*)::int as n, min(id)::int as lo, max(id)::int as hi from ${sql(table)}`;
    t.same(after, { n: 7, lo: 1, hi: 7 }, `${table}: reseeded`);
    await seedTable(sql, table, 0);
    const [empty] = await sql`select count(*)::int as n from ${sql(table)}`;
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
    from (select count(*) as n from events group by occurred_at having count(*) > 1) bursts`;
  t.ok(row!.largest >= 50, `the largest burst has ${row!.largest} items on one timestamp`);
  t.ok(row!.shared_timestamps >= 10, `${row!.shared_timestamps} timestamps are shared`);
  t.ok(row!.items >= sizes.events / 10, `${row!.items} of ${sizes.events} items share their timestamp`);
});

t.test('npm run seed arguments: sizes per collection; anything else is one clear error', async (t) => {
  t.same(parseSeedArgs(['--products', '1000000', '--events=5']), [['products', 1_000_000], ['events', 5]]);
  t.same(parseSeedArgs(['--orders', '1_000']), [['orders', 1_000]]);
  t.throws(() => parseSeedArgs([]), /Nothing to seed/);
  t.throws(() => parseSeedArgs(['--users', '5']), /Unknown option '--users'/);
  t.throws(() => parseSeedArgs(['--products']), /argument missing/);
  t.throws(() => parseSeedArgs(['--products=-1']), /Invalid --products/);
  t.throws(() => parseSeedArgs(['--products', '-1']), /^Invalid arguments: Option '--products' argument is ambiguous$/);
  t.throws(() => parseSeedArgs(['--products', '1e6']), /Invalid --products/);
  t.throws(() => parseSeedArgs(['products']), /Unexpected argument/);
});
