// The default count: exact under the collection's threshold, the planner's estimate above it, and the chunk
// says which; a count is charged by the rows it reads, priced up front from the estimate and settled after.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { snapshotRegistry } from '../helpers/collections.ts';
import { chargedUnits, limits, setTier } from '../helpers/limiter.ts';

// The demo products with a small threshold and price, so that a few hundred rows stand for a big table:
// exact under 50 rows, one unit per 20 rows counted.
const registry = snapshotRegistry(`
collections:
  - relation: demo.products
    columns: [id, name, category]
    variants: [offset, page]
    defaultVariant: offset
    filters: { category: [eq] }
    sort: [id]
    order: id
    countThreshold: 50
    cost: { countedPerUnit: 20 }
`);

async function sized(t: { teardown(fn: () => unknown): void }, rows: number) {
  const api = await testApp(t, { seed: { products: rows }, registry, rateLimit: true });
  await api.database.sql`vacuum analyze demo.products`;
  await setTier(api.database.sql, 'anonymous', { allowance: 1000, windowSeconds: 600, concurrency: 4 });
  return api;
}

t.test('under the threshold the default chunk is counted exactly and says so', async (t) => {
  const api = await sized(t, 30);
  const res = await api.request('/v1/products?limit=5');
  const body = await res.json();
  t.equal(body.size, 30);
  t.equal(body.count, 'exact', 'the chunk says its size is a count');
  t.equal(limits(res).remaining, 1000 - 2, '5 items (1) and 30 rows counted (1)');
  const page = await (await api.request('/v1/products?page=1&page-size=10')).json();
  t.same([page.totalPages, page.count], [3, 'exact']);
  t.equal(await chargedUnits(api.database.sql), 4);
});

t.test('above the threshold the default chunk carries the estimate, says so, and is charged no count', async (t) => {
  const api = await sized(t, 500);
  const res = await api.request('/v1/products?limit=5');
  const body = await res.json();
  t.equal(body.count, 'estimated', 'the chunk says its size is the estimate');
  t.ok(body.size >= 400 && body.size <= 600, `the planner's estimate: ${body.size}`);
  t.equal(limits(res).remaining, 999, 'the items only: an estimate reads no rows');
  const exact = await api.request('/v1/products?limit=5&count=exact');
  const exactBody = await exact.json();
  t.same([exactBody.size, exactBody.count], [500, 'exact']);
  t.equal(limits(exact).remaining, 999 - 1 - 25, 'an exact count of 500 rows: 25 units');
  const estimated = await (await api.request('/v1/products?limit=5&count=estimated')).json();
  t.equal(estimated.count, 'estimated');
  const none = await (await api.request('/v1/products?limit=5&count=none')).json();
  t.same([none.size, none.count], [undefined, undefined], 'count=none: no size, nothing to say');
  t.equal(await chargedUnits(api.database.sql), 1 + 26 + 1 + 1);
});

t.test('a count the estimate overpriced gives units back; one it underpriced is charged after', async (t) => {
  const api = await sized(t, 500);
  // Rows deleted since the statistics were taken: the estimate still sees about 500, the count reads 100.
  await api.database.sql`delete from demo.products where id > 100`;
  const over = await api.request('/v1/products?limit=5&count=exact', { address: '192.0.2.10' });
  t.equal((await over.json()).size, 100);
  t.equal(limits(over).remaining, 1000 - 1 - 5, 'settled at the 100 rows read: 5 units, the rest given back');
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.10'), 6, 'and in the database');

  // A category the statistics have never seen: the planner expects a row or so; 100 rows are counted.
  await api.database.sql`update demo.products set category = 'brand-new' where id <= 100`;
  const under = await api.request('/v1/products?limit=5&count=exact&category=brand-new', { address: '192.0.2.11' });
  t.equal((await under.json()).size, 100);
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.11'), 1 + 5, 'the count read 100 rows: 5 units charged after');
  const next = await api.request('/v1/products?limit=5&count=none', { address: '192.0.2.11' });
  t.equal(limits(next).remaining, 1000 - 6 - 1, 'the next request sees them');
});

t.test("an instance keeps a planner's estimate for a second, then asks again", async (t) => {
  const api = await sized(t, 500);
  const size = async () => (await (await api.request('/v1/products?limit=5&count=estimated')).json()).size as number;
  const before = await size();
  t.ok(before >= 400 && before <= 600, `the estimate of 500 rows: ${before}`);
  await api.database
    .sql`insert into demo.products (name, category, price_cents, created_at) select 'More ' || i, 'games', i, now() from generate_series(1, 2000) as i`;
  await api.database.sql`analyze demo.products`;
  t.equal(await size(), before, 'within the second: the estimate kept, no EXPLAIN sent');
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const after = await size();
  t.ok(after >= 2000, `a second later, the statistics' new estimate: ${after}`);
});
