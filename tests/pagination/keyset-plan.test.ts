// Keyset chunks deep in a collection are served by an index scan, with no sort over the table (EXPLAIN), in the
// plan for the values and in the generic plan of the shape, which a prepared statement may use for any values; and
// deep in an order by a nullable key, each run of the index (values, NULLs) is scanned from where the chunk starts.
import { eq, type Placeholder } from 'drizzle-orm';
import t from 'tap';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';
import { formatEpoch } from '../../db/timestamps.ts';
import { demoRegistry } from '../../demo/collections.ts';
import { parseFilters } from '../../lib/pagination/filters.ts';
import { type KeyValue, keysetQuery, keysetValues, positionOf, type Region } from '../../lib/pagination/keyset.ts';
import { type SortKey, splitSort } from '../../lib/pagination/registry.ts';
import { loadRegistry } from '../../lib/pagination/runtime.ts';
import { sortParam, withTieBreaker } from '../../lib/pagination/sort.ts';
import { testApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

const cases = [
  { collection: 'products', sort: 'id', filters: {}, index: 'products_pkey' },
  { collection: 'products', sort: 'priceCents', filters: {}, index: 'products_price_cents_id_idx' },
  { collection: 'products', sort: '-priceCents', filters: {}, index: 'products_price_cents_id_idx' },
  { collection: 'products', sort: '-name', filters: {}, index: 'products_name_id_idx' },
  { collection: 'products', sort: 'createdAt', filters: {}, index: 'products_created_at_id_idx' },
  { collection: 'orders', sort: '-createdAt', filters: {}, index: 'orders_created_at_id_idx' },
  { collection: 'orders', sort: 'totalCents', filters: {}, index: 'orders_total_cents_id_idx' },
  // With a filter the planner may walk the order's index and filter, or the filter's index: either way no sort.
  {
    collection: 'orders',
    sort: '-createdAt',
    filters: { status: 'paid' },
    index: 'orders_status_created_at_id_idx|orders_created_at_id_idx',
  },
  { collection: 'orders', sort: '-createdAt', filters: { customerId: '42' }, index: 'orders_customer_id_created_at_id_idx' },
  // the time variant's orders (newest first, and oldest first), and since_id
  { collection: 'events', sort: '-occurredAt', filters: {}, index: 'events_occurred_at_id_idx' },
  { collection: 'events', sort: 'occurredAt', filters: {}, index: 'events_occurred_at_id_idx' },
  {
    collection: 'events',
    sort: '-occurredAt',
    filters: { type: 'login' },
    index: 'events_type_occurred_at_id_idx|events_occurred_at_id_idx',
  },
  { collection: 'events', sort: 'id', filters: {}, index: 'events_pkey' },
] as const;

t.test('a deep keyset chunk is an index scan with no sort', async (t) => {
  const app = await testApp(t, { seed: { products: 20_000, orders: 20_000, events: 20_000 } });
  const registry = demoRegistry();
  for (const c of cases) {
    const collection = registry.get(c.collection)!;
    const keys = withTieBreaker(splitSort(c.sort));
    const filters = parseFilters(collection, new Map(Object.entries(c.filters)));
    // The position: an item about three quarters of the way through the filtered order.
    const order = keys.map((k) => `${collection.fields.get(k.field)!.column.name} ${k.descending ? 'desc' : 'asc'}`).join(', ');
    const where =
      Object.entries(c.filters)
        .map(([f, v]) => `${collection.fields.get(f)!.column.name} = '${v}'`)
        .join(' and ') || 'true';
    const [{ n }] = (await app.database.sql.unsafe(`select count(*)::int as n from demo.${c.collection} where ${where}`)) as unknown as [
      { n: number },
    ];
    const depth = Math.floor(n * 0.75);
    const [deep] = await app.database.sql.unsafe(
      `select id from demo.${c.collection} where ${where} order by ${order} limit 1 offset ${depth}`,
    );
    const [row] = await app.database.drizzle
      .select(collection.selection)
      .from(collection.table)
      .where(eq(collection.fields.get('id')!.column, Number(deep!.id)));
    // The item as the service prints it: timestamps from their epoch seconds.
    const item = Object.fromEntries(
      Object.entries(row!).map(([name, value]) => [
        name,
        collection.fields.get(name)!.type === 'timestamp' ? formatEpoch(value as string) : value,
      ]),
    );
    const start = { after: positionOf(item, keys) };
    const query = keysetQuery(app.database, collection, filters, keys, start, 20).toSQL();
    const values = keysetValues(collection, filters, start);
    const params = query.params.map((param) => values[(param as Placeholder).name]);
    const label = `${c.collection} sort=${c.sort} ${JSON.stringify(c.filters)} at ${depth} of ${n}`;
    const check = (plan: PlanNode, which: string) => {
      const all = nodes(plan);
      t.ok(
        all.some((node) => /Index (Only )?Scan/.test(node['Node Type']) && c.index.split('|').includes(node['Index Name'] ?? '')),
        `${label}, ${which}: scans ${c.index} (${all.map((node) => `${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}`).join(' > ')})`,
      );
      t.same(
        all.filter((node) => /Sort|Seq Scan/.test(node['Node Type'])).map((node) => node['Node Type']),
        [],
        `${label}, ${which}: no sort and no sequential scan`,
      );
    };
    const [custom] = await app.database.sql.unsafe(`explain (format json) ${query.sql}`, params as never[]);
    check((custom!['QUERY PLAN'] as [{ Plan: PlanNode }])[0].Plan, 'plan for the values');
    // The generic plan: the statement prepared in SQL, explained with plan_cache_mode forcing it.
    const literal = (value: unknown) => (typeof value === 'number' ? String(value) : `'${String(value).replace(/'/g, "''")}'`);
    const generic = await app.database.sql.begin(async (tx) => {
      await tx.unsafe('set local plan_cache_mode = force_generic_plan');
      await tx.unsafe(`prepare shape as ${query.sql}`);
      const [explained] = await tx.unsafe(`explain (format json) execute shape(${params.map(literal).join(', ')})`);
      await tx.unsafe('deallocate shape');
      return (explained!['QUERY PLAN'] as [{ Plan: PlanNode }])[0].Plan;
    });
    check(generic, 'generic plan');
    const rows = await app.database.sql.unsafe(query.sql, params as never[]);
    t.equal(rows.length, Math.min(21, n - depth - 1), `${label}: one row more than the page, or what is left`);
  }
});

interface AnalyzedNode extends PlanNode {
  'Actual Rows'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: AnalyzedNode[];
}

t.test('deep in an order by a nullable key, a chunk reads its own rows, not every row before its position', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(`
    create table public.scores (id int primary key, score int);
    create index scores_score_id on public.scores (score, id);
    insert into public.scores select n, case when n % 10 = 0 then null else n % 1000 end from generate_series(1, 20000) n;
    analyze public.scores;`);
  const registry = await loadRegistry(database.sql, 'collections: [{relation: public.scores, sort: [score]}]', 'collections.yaml', {
    serviceSchema: SERVICE_SCHEMA,
  });
  const collection = registry.get('scores')!;
  const scans = async (keys: SortKey[], after: KeyValue[], region?: Region) => {
    const start = { after };
    const query = keysetQuery(database, collection, [], keys, start, 20, region).toSQL();
    const values = keysetValues(collection, [], start, region);
    const params = query.params.map((param) => values[(param as Placeholder).name]);
    const [explained] = await database.sql.unsafe(`explain (analyze, format json) ${query.sql}`, params as never[]);
    const all = nodes((explained!['QUERY PLAN'] as [{ Plan: AnalyzedNode }])[0].Plan) as AnalyzedNode[];
    t.same(
      all.filter((node) => /Sort|Seq Scan/.test(node['Node Type'])).map((node) => node['Node Type']),
      [],
      `${sortParam(keys)} after ${JSON.stringify(after)} ${region ?? ''}: no sort`,
    );
    // What the scan read: the rows it returned and those its filter dropped.
    return all.reduce(
      (sum, node) => sum + (/Index/.test(node['Node Type']) ? (node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0) : 0),
      0,
    );
  };
  const ascending = withTieBreaker(splitSort('score'));
  const descending = withTieBreaker(splitSort('-score'));
  // Three quarters of the way through the values ascending; among the NULLs (which come first) descending.
  const deepValue: KeyValue[] = [750, 750];
  const deepNull: KeyValue[] = [null, 15000];
  t.ok((await scans(ascending, deepValue)) > 10_000, 'one predicate over both runs reads every row before the position');
  t.ok((await scans(ascending, deepValue, 'position')) <= 21, "the position's run: a bounded scan");
  t.ok((await scans(ascending, deepValue, 'beyond')) <= 21, 'the NULLs after it: from their start');
  t.ok((await scans(descending, deepNull, 'position')) <= 21, 'descending, among the NULLs: a bounded scan');
  t.ok((await scans(descending, deepNull, 'beyond')) <= 21, 'and the values after them: from their start');
});
