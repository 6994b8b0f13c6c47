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
