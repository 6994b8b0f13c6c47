// The cost rule: page size, exact counts, the rows an offset skips, sorts no index serves; charged through the limiter.
import t from 'tap';
import { products } from '../../db/schema.ts';
import { encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { demoRegistry } from '../../lib/pagination/demo-collections.ts';
import { requestCost } from '../../lib/pagination/price.ts';
import { type CollectionDeclaration, defineCollection } from '../../lib/pagination/registry.ts';
import { testApp } from '../helpers/app.ts';
import { limits, setTier } from '../helpers/limiter.ts';

const demo = demoRegistry();
const productsCollection = demo.get('products')!;
const SECRET = 'x'.repeat(32);

function cursorOf(payload: Record<string, unknown>): string {
  return encodeCursor(SECRET, { v: 'cursor', c: 'products', f: [], ...payload });
}

t.test('offsets cost one unit per whole 1,000 rows skipped along an index, 10,000 along the primary key', async (t) => {
  const cases: [string, number][] = [
    ['', 1], // 20 items (1), nothing skipped; the count is priced by its estimate (none here)
    ['count=none&offset=9999', 1], // along the primary key: under 10,000 rows is free
    ['count=none&offset=10000', 2],
    ['offset=999000', 100], // 1 + 99
    ['count=none&sort=name&offset=999', 1],
    ['count=none&sort=name&offset=1000', 2],
    ['sort=-priceCents,name&offset=999000&count=none', 1000], // the storm of issue 11: 1 + 999
    ['sort=-createdAt&offset=100000&limit=100&count=estimated', 102],
    ['page=500&page-size=100&count=none&sort=name', 52], // offset 50,000: 2 + 50
    ['page=500&page-size=100', 7], // offset 50,000 along id: 2 + 5
    ['limit=51&offset=10', 2], // small offsets cost what they did
    ['page=3&page-size=100', 2],
    ['count=none&offset=9007199254740991&sort=name', 2 ** 31 - 1], // within rate_decide's int, capped there
  ];
  for (const [query, cost] of cases) t.equal(requestCost(productsCollection, query, SECRET), cost, query);
});

t.test('a count costs one unit per whole 5,000 rows it reads, priced from the planner estimate', async (t) => {
  const cases: [string, number, number][] = [
    ['count=exact', 1_000_000, 1 + 200], // an exact count reads the whole filtered set
    ['count=exact', 4_999, 1],
    ['count=exact&limit=100', 50_000, 2 + 10],
    ['', 1_000_000, 1], // the default: over the threshold, the estimate, which reads no rows
    ['', 10_000, 1], // at the threshold: the estimate
    ['', 9_999, 1 + 1], // under it: counted, at most 10,000 rows
    ['count=estimated', 1_000_000, 1],
    ['count=none', 1_000_000, 1],
    ['page=2&page-size=100&count=exact', 250_000, 2 + 50],
  ];
  for (const [query, estimate, cost] of cases)
    t.equal(requestCost(productsCollection, query, SECRET, estimate), cost, `${query} of ${estimate}`);
});

t.test('keyset chunks skip nothing: their cost does not grow with depth', async (t) => {
  const deep = cursorOf({ s: '-priceCents,name,id', k: [100, 'Amber Anvil 1', 999_000] });
  t.equal(requestCost(productsCollection, 'page-size=20&sort=-priceCents,name', SECRET), 1);
  t.equal(requestCost(productsCollection, `page-size=100&cursor=${deep}`, SECRET), 2);
  t.equal(requestCost(demo.get('orders')!, 'page-size=100', SECRET), 2);
  t.equal(requestCost(demo.get('events')!, 'before=2025-06-01T00:00:00Z', SECRET), 1);
  t.equal(requestCost(demo.get('events')!, 'since_id=900000&page-size=100', SECRET), 2);
});

t.test('a malformed query still costs 1, whatever it asks for', async (t) => {
  for (const query of [
    'offset=-1',
    'offset=abc',
    'offset=9007199254740992',
    'count=none&sort=nope&offset=999000',
    'sort=name,name&offset=999000',
    'page=9007199254740991&page-size=100',
    'limit=101&offset=999000',
    'count=maybe&offset=999000',
    'offset=999000&offset=1',
    '%zz',
  ]) {
    t.equal(requestCost(productsCollection, query, SECRET), 1, query);
  }
  // orders and events offer no offset or page variant: such a request is a 400, not a deep read.
  for (const query of ['offset=999000', 'page=9990&page-size=100', 'limit=100']) {
    t.equal(requestCost(demo.get('orders')!, query, SECRET), 1, `orders?${query}`);
    t.equal(requestCost(demo.get('events')!, query, SECRET), 1, `events?${query}`);
  }
});

const withUnindexedName: CollectionDeclaration = {
  name: 'unindexed',
  table: products,
  fields: { id: { column: products.id, type: 'bigint' }, name: { column: products.name, type: 'text' } },
  variants: ['offset', 'cursor'],
  defaultVariant: 'offset',
  filters: {},
  sortKeys: ['id', 'name'],
  defaultSort: 'id',
  pageSize: { default: 20, max: 100 },
  cost: { itemsPerUnit: 50, countedPerUnit: 5_000, indexed: { id: 10_000 }, unindexedSort: 250 },
};

t.test('a sort whose first key has no index costs the declared surcharge, in every variant', async (t) => {
  const collection = defineCollection(withUnindexedName);
  t.equal(requestCost(collection, '', SECRET), 1, 'the default order has an index');
  t.equal(requestCost(collection, 'count=none&sort=name', SECRET), 251);
  t.equal(requestCost(collection, 'count=none&sort=-name,id&offset=50000', SECRET), 256, 'the offset as along the slowest index');
  t.equal(requestCost(collection, 'count=none&sort=id,name&offset=50000', SECRET), 6, 'only the first key decides');
  t.equal(requestCost(collection, 'page-size=20&sort=-name', SECRET), 251, 'cursor variant, first chunk');
  const cursor = encodeCursor(SECRET, { v: 'cursor', c: 'unindexed', s: 'name,id', f: [], k: ['x', 1] });
  t.equal(requestCost(collection, `page-size=20&cursor=${cursor}`, SECRET), 251, 'cursor variant, later chunks');
});

t.test('a declaration must price every order it offers', async (t) => {
  const { unindexedSort: _, ...costWithout } = withUnindexedName.cost;
  t.throws(() => defineCollection({ ...withUnindexedName, cost: costWithout }), {
    message: 'Invalid collection unindexed: name has no index declared in its cost rule, so the rule needs a positive unindexedSort',
  });
  t.throws(() => defineCollection({ ...withUnindexedName, cost: { ...withUnindexedName.cost, indexed: { id: 0 } } }), {
    message: 'Invalid collection unindexed: cost of the index on id must be a positive whole number of rows',
  });
  t.throws(() => defineCollection({ ...withUnindexedName, cost: { ...withUnindexedName.cost, indexed: { nope: 10 } } }), {
    message: 'Invalid collection unindexed: cost of an index on unknown field nope',
  });
});

t.test('through the limiter, Remaining drops by the cost, capped at the allowance', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 2000, windowSeconds: 60, concurrency: 4 });
  const deep = await api.request('/v1/products?sort=-priceCents,name&offset=999000&count=none');
  t.equal(deep.status, 200);
  t.equal(limits(deep).remaining, 1000, 'the storm request costs 1000');
  const byId = await api.request('/v1/products?offset=20000&count=none');
  t.equal(limits(byId).remaining, 997, 'offset 20,000 along the primary key costs 3');
  const cursor = await api.request('/v1/products?page-size=100&sort=-priceCents,name');
  t.equal(limits(cursor).remaining, 995, 'a keyset chunk costs its page size only');
  const bad = await api.request('/v1/products?offset=999000&sort=nope');
  t.equal(bad.status, 400);
  t.equal(limits(bad).remaining, 994, 'a malformed request costs 1');

  // A free-sized allowance pays for one storm request per window, then declines until the window has passed.
  await setTier(api.database.sql, 'anonymous', { allowance: 600, windowSeconds: 60, concurrency: 4 });
  const first = await api.request('/v1/products?sort=-priceCents,name&offset=999000&count=none', { address: '192.0.2.77' });
  t.equal(first.status, 200);
  t.equal(limits(first).remaining, 0, 'cost 1000 capped at the allowance of 600');
  const second = await api.request('/v1/products?sort=-priceCents,name&offset=999000&count=none', { address: '192.0.2.77' });
  t.equal(second.status, 429);
  api.clock += 61;
  const later = await api.request('/v1/products?sort=-priceCents,name&offset=999000&count=none', { address: '192.0.2.77' });
  t.equal(later.status, 200, 'served again once the window has passed');
});

// Every 400 costs exactly 1, and a query that is served is charged as it is served: cost and the handler
// read the query with the same functions. For every collection and many queries, a request through the app
// is a 400 exactly when its cost is 1 for a reason other than its size.
t.test('cost and selection agree: a 400 of any kind costs 1, a served chunk costs what it serves', async (t) => {
  const api = await testApp(t, { seed: { products: 30, orders: 30, events: 30 }, env: { CURSOR_SECRET: SECRET } });
  const queries = [
    '',
    'limit=5',
    'limit=005',
    'limit=100',
    'limit=0100',
    'offset=0',
    'offset=20&limit=5',
    'page=1',
    'page=1&page-size=020',
    'page-size=20',
    'page-size=100&count=none',
    'count=estimated',
    'count=none&offset=5000',
    'sort=nope',
    'limit=5&sort=nope',
    'sort=-name',
    'since_id=3',
    'since_id=3&sort=id',
    'before=2025-01-01T00:00:00Z',
    'after=2025-01-01T00:00:00Z&page-size=50',
    'cursor=abc',
    'cursor=abc&page-size=100',
    `cursor=${cursorOf({ s: 'id', k: [3] })}`,
    'count=exact&page-size=100',
    'category=books',
    'status=paid',
    'type=click',
    'nope=1',
    'limit=5&page=1',
    'limit=1&limit=2',
    'page-size=100&count=none&sort=name',
  ];
  for (const name of ['products', 'orders', 'events']) {
    const collection = demo.get(name)!;
    for (const query of queries) {
      const res = await api.request(`/v1/${name}?${query}`);
      const cost = requestCost(collection, query, SECRET);
      if (res.status === 400) t.equal(cost, 1, `${name}?${query} is a 400 and costs 1`);
      else {
        t.equal(res.status, 200, `${name}?${query} is served`);
        const body = (await res.json()) as Record<string, unknown>;
        const size = Number(body.limit ?? body.pageSize);
        t.ok(cost >= Math.ceil(size / collection.cost.itemsPerUnit), `${name}?${query}: cost ${cost} covers ${size} items`);
      }
    }
  }
});
