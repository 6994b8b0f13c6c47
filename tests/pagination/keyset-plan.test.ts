// Keyset chunks deep in a collection are served by an index scan, with no sort over the table (EXPLAIN).
import { eq } from 'drizzle-orm';
import t from 'tap';
import { demoRegistry } from '../../lib/pagination/demo-collections.ts';
import { filterCondition, parseFilters } from '../../lib/pagination/filters.ts';
import { afterPosition, keysetQuery, positionOf } from '../../lib/pagination/keyset.ts';
import { splitSort } from '../../lib/pagination/registry.ts';
import { withTieBreaker } from '../../lib/pagination/sort.ts';
import { testApp } from '../helpers/app.ts';

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
    const [{ n }] = (await app.database.sql.unsafe(`select count(*)::int as n from ${c.collection} where ${where}`)) as unknown as [
      { n: number },
    ];
    const depth = Math.floor(n * 0.75);
    const [deep] = await app.database.sql.unsafe(`select id from ${c.collection} where ${where} order by ${order} limit 1 offset ${depth}`);
    const [item] = await app.database.drizzle
      .select(collection.selection)
      .from(collection.table)
      .where(eq(collection.fields.get('id')!.column, Number(deep!.id)));
    const position = positionOf(item!, keys);
    const query = keysetQuery(
      app.database,
      collection,
      [filterCondition(collection, filters), afterPosition(collection, keys, position)],
      keys,
      20,
    ).toSQL();
    const [row] = await app.database.sql.unsafe(`explain (format json) ${query.sql}`, query.params as never[]);
    const plan = (row!['QUERY PLAN'] as [{ Plan: PlanNode }])[0].Plan;
    const all = nodes(plan);
    const label = `${c.collection} sort=${c.sort} ${JSON.stringify(c.filters)} at ${depth} of ${n}`;
    t.ok(
      all.some((node) => /Index (Only )?Scan/.test(node['Node Type']) && c.index.split('|').includes(node['Index Name'] ?? '')),
      `${label}: scans ${c.index} (${all.map((node) => `${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}`).join(' > ')})`,
    );
    t.notOk(
      all.some((node) => /Sort|Seq Scan/.test(node['Node Type'])),
      `${label}: no sort and no sequential scan`,
    );
    const rows = await app.database.sql.unsafe(query.sql, query.params as never[]);
    t.equal(rows.length, Math.min(21, n - depth - 1), `${label}: one row more than the page, or what is left`);
  }
});
