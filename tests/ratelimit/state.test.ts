// The allowance's states (docs/explanation/rate-limit.md, "States"), row by row, on a movable database clock: within allowance, exceeded, restored.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { chargedUnits, dbNow, limits, setTier } from '../helpers/limiter.ts';

// /v1 and products?count=none&limit=20 cost 1 unit each.
const ONE = '/v1/products?count=none&limit=20';

t.test('within allowance: served, Remaining decreases, every header present', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 5, windowSeconds: 10, concurrency: 4 });
  const before = Math.floor(await dbNow(api.database));
  for (let i = 1; i <= 5; i++) {
    const res = await api.request(i % 2 ? '/v1' : ONE);
    t.equal(res.status, 200);
    const h = limits(res);
    t.equal(h.limit, 5);
    t.equal(h.remaining, 5 - i, `remaining after ${i}`);
    t.equal(h.retryAfter, undefined, 'no Retry-After on a success');
    // Success: Reset is when the whole allowance is back: the current bucket (b = 1 s) + the window.
    t.ok(h.reset >= before + 11 && h.reset <= before + 13, `reset ${h.reset} ~ now + 11`);
    t.equal(res.headers.get('ratelimit-policy'), '"anonymous";q=5;w=10');
    t.match(res.headers.get('ratelimit'), new RegExp(`^"anonymous";r=${5 - i};t=(10|11|12)$`));
  }
});

t.test('within allowance → exceeded: 429 with Retry-After and a problem body', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 3, windowSeconds: 10, concurrency: 4 });
  for (let i = 0; i < 3; i++) t.equal((await api.request('/v1')).status, 200);
  const res = await api.request('/v1');
  t.equal(res.status, 429);
  t.equal(res.headers.get('content-type'), 'application/problem+json');
  const body = await res.json();
  t.equal(body.code, 'Request_limit_exceeded');
  t.equal(body.status, 429);
  const h = limits(res);
  t.equal(h.limit, 3);
  t.equal(h.remaining, 0);
  const now = Math.floor(await dbNow(api.database));
  t.ok(h.retryAfter! >= 1 && h.retryAfter! <= 12, `retry-after ${h.retryAfter}`);
  t.ok(Math.abs(h.reset - h.retryAfter! - now) <= 1, 'Retry-After = Reset - now: it never points past Reset');
  t.ok(res.headers.get('ratelimit-policy'));
});

t.test('exceeded: further requests are declined and use up nothing, whatever else is wrong', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 2, windowSeconds: 10, concurrency: 4 });
  await api.request('/v1');
  // A success's Reset: when the whole allowance is back. The two units may sit in buckets of different
  // seconds, so a request costing both (limit=100, capped at the allowance) first fits then, one costing 1
  // earlier, at the first 429's Reset.
  const served = limits(await api.request('/v1'));
  const first = limits(await api.request('/v1'));
  for (const path of ['/v1', '/v1/products?limit=abc', '/v1/nope', '/v1/products?limit=100']) {
    const res = await api.request(path);
    t.equal(res.status, 429, path);
    t.equal((await res.json()).code, 'Request_limit_exceeded');
    const h = limits(res);
    t.equal(h.remaining, 0);
    t.ok(h.reset <= served.reset, `${path}: declined requests do not push Reset later`);
    if (path === '/v1') t.equal(h.reset, first.reset, 'a request of the same cost fits at the same second');
  }
  t.equal(await chargedUnits(api.database.sql), 2, 'only the two served requests were charged');
});

t.test('exceeded → within allowance when the clock reaches Reset', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 2, windowSeconds: 10, concurrency: 4 });
  // Both units in one 1-second bucket (a 10 s window), so they leave together at Reset: the clock is
  // moved to just after a whole second first. Two requests straddling a second boundary would leave one
  // by one, and then only one unit is back at the 429's Reset (when this request's cost first fits).
  const now = await dbNow(api.database);
  api.clock = Math.ceil(now) + 0.05 - now;
  await api.request('/v1');
  await api.request('/v1');
  const declined = await api.request('/v1');
  t.equal(declined.status, 429);
  const { reset } = limits(declined);
  // Just before Reset: still exceeded.
  api.clock = reset - 0.8 - (await dbNow(api.database));
  t.equal((await api.request('/v1')).status, 429, 'before Reset: declined');
  // At Reset: restored.
  api.clock = reset - (await dbNow(api.database));
  const res = await api.request('/v1');
  t.equal(res.status, 200, 'at Reset: served');
  t.equal(limits(res).remaining, 1, 'the whole allowance was back; this request used one unit');
});

t.test('a success says when the whole allowance is back, and it is', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 4, windowSeconds: 10, concurrency: 4 });
  await api.request('/v1');
  api.clock = 3;
  await api.request('/v1');
  const last = limits(await api.request('/v1'));
  t.equal(last.remaining, 1);
  api.clock = last.reset - (await dbNow(api.database)) - 0.8;
  // Before Reset the first unit is gone, the two later ones still count.
  t.equal(limits(await api.request('/v1')).remaining, 1, 'before Reset, the later units still count');
  api.clock = last.reset - (await dbNow(api.database)) + 0.01;
  // The request just above (sent at Reset - 0.8) counts on; everything before it is back.
  t.equal(limits(await api.request('/v1')).remaining, 2);
});

t.test('a sliding window, not a fixed one: units leave one bucket at a time', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 3, windowSeconds: 4, concurrency: 4 });
  const start = await dbNow(api.database);
  api.clock = Math.ceil(start) + 0.05 - start; // at the start of a second
  t.equal((await api.request('/v1')).status, 200);
  api.clock += 2;
  t.equal((await api.request('/v1')).status, 200);
  t.equal((await api.request('/v1')).status, 200);
  const declined = await api.request('/v1');
  t.equal(declined.status, 429);
  // The first unit (bucket s) stops counting at s + 1 + 4, two seconds before the other two.
  t.equal(limits(declined).retryAfter, 3);
  api.clock += 3;
  const one = await api.request('/v1');
  t.equal(one.status, 200, 'the oldest unit has left the window');
  t.equal(limits(one).remaining, 0);
  t.equal((await api.request('/v1')).status, 429, 'the other two still count');
});

t.test('errors under /v1 are charged and carry the headers', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 10, windowSeconds: 60, concurrency: 4 });
  const cases: [string, number][] = [
    ['/v1/products?limit=abc', 400],
    ['/v1/products?limit=1&limit=2', 400],
    ['/v1/nope', 404],
    ['/v1/products/1', 404],
    ['/v1/products?%zz=1', 400],
  ];
  let remaining = 10;
  for (const [path, status] of cases) {
    const res = await api.request(path);
    t.equal(res.status, status, path);
    t.equal(limits(res).remaining, --remaining, `${path} costs 1`);
    t.ok(res.headers.get('ratelimit'), `${path} has RateLimit`);
    t.ok(res.headers.get('x-ratelimit-reset'));
  }
  const put = await api.request('/v1/products', { method: 'PUT' });
  t.equal(put.status, 405);
  t.equal(limits(put).remaining, --remaining);
});

t.test('a name under /v1 is charged once, by the collection it decodes to: the keys, a percent-encoded name', async (t) => {
  const api = await testApp(t, { rateLimit: true, seed: { products: 5 } });
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 4 });
  const cases: [string, number, string | null][] = [
    ['/v1/keys', 405, 'POST'],
    ['/v1/%6Beys', 405, 'POST'],
    ['/v1/pro%64ucts?limit=1&count=none', 200, null],
    ['/v1/pro%64ucts?limit=abc', 400, null],
  ];
  let remaining = 100;
  for (const [path, status, allow] of cases) {
    const res = await api.request(path);
    t.equal(res.status, status, path);
    t.equal(res.headers.get('allow'), allow, `${path}: Allow`);
    t.equal(limits(res).remaining, --remaining, `${path} costs 1, charged once`);
  }
  const served = await api.request('/v1/pro%64ucts?limit=1&count=none');
  t.equal((await served.json()).products.length, 1, 'the encoded name serves the collection it names');
});

t.test('health, readiness and admin are not rate limited', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 1, windowSeconds: 60, concurrency: 4 });
  await api.request('/v1');
  t.equal((await api.request('/v1')).status, 429);
  for (const path of ['/healthz', '/readyz']) {
    const res = await api.request(path);
    t.equal(res.status, 200, path);
    t.equal(res.headers.get('x-ratelimit-limit'), null, `${path} has no rate-limit headers`);
  }
});

t.test("readiness needs the limiter's connection too: without it, /readyz is 503 while /healthz stays 200", async (t) => {
  const api = await testApp(t, { rateLimit: true });
  t.equal((await api.request('/readyz')).status, 200);
  await api.database.limiter.sql.end();
  const res = await api.request('/readyz');
  t.equal(res.status, 503);
  t.equal((await res.json()).code, 'unavailable');
  t.equal((await api.request('/v1')).status, 503, 'as a rate-limited request is');
  t.equal((await api.request('/healthz')).status, 200);
});
