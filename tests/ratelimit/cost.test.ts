// The cost rule charged through the limiter: Remaining drops by a request's cost, capped at the allowance. The
// rule itself, and its agreement with what the handler serves, are tested without a database in
// tests/pagination/price.unit.test.ts.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { limits, setTier } from '../helpers/limiter.ts';

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

  // A request that costs more than a whole allowance could never be paid within a window: refused as such,
  // whatever is left, charging nothing (docs/reference/costs.md, "The rule"); a pro-sized allowance runs it.
  await setTier(api.database.sql, 'anonymous', { allowance: 600, windowSeconds: 60, concurrency: 4 });
  const first = await api.request('/v1/products?sort=-priceCents,name&offset=999000&count=none', { address: '192.0.2.77' });
  t.equal(first.status, 403);
  const problem = await first.json();
  t.equal(problem.code, 'Cost_exceeds_allowance');
  t.match(problem.detail, /costs 1000 units, more than the 600 units per 60 s/);
  t.equal(first.headers.get('retry-after'), null, 'waiting would not help');
  t.equal(limits(first).remaining, 600, 'nothing charged');
  api.clock += 61;
  const later = await api.request('/v1/products?sort=-priceCents,name&offset=999000&count=none', { address: '192.0.2.77' });
  t.equal(later.status, 403, 'refused in every window');
  const cheap = await api.request('/v1/products?count=none', { address: '192.0.2.77' });
  t.equal(limits(cheap).remaining, 599, 'the client keeps its whole allowance for what it can pay');
});
