// The app's fixed routes: index, health, readiness, 404 and 405 as problem+json.
import t from 'tap';
import { testApp } from '../helpers/app.ts';

t.test('GET /v1 links every collection with absolute URLs', async (t) => {
  const { json } = await testApp(t);
  const { status, body, headers } = await json('/v1');
  t.equal(status, 200);
  t.same(Object.keys(body._links), ['self', 'products', 'orders', 'events']);
  t.equal(body._links.products.href, 'http://test.local/v1/products');
  t.match(headers.get('link'), /<http:\/\/test\.local\/v1\/orders>; rel="orders"/);
});

t.test('health and readiness', async (t) => {
  const { json } = await testApp(t);
  t.equal((await json('/healthz')).status, 200);
  t.equal((await json('/readyz')).status, 200);
});

t.test('unknown paths and collections are 404 problem+json; other methods 405', async (t) => {
  const { request } = await testApp(t);
  for (const path of ['/nope', '/v1/nope', '/v1/products/1', '/v2/products']) {
    const res = await request(path);
    t.equal(res.status, 404, path);
    t.equal(res.headers.get('content-type'), 'application/problem+json', path);
    t.equal((await res.json()).code, 'not_found', path);
  }
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
    const res = await request('/v1/products', { method });
    t.equal(res.status, 405, method);
    t.equal(res.headers.get('allow'), 'GET, HEAD');
    t.equal((await res.json()).code, 'method_not_allowed');
  }
});

t.test('HEAD, which every Allow header offers, answers like GET without a body', async (t) => {
  const { request } = await testApp(t, { seed: { products: 5 } });
  const get = await request('/v1/products?limit=2');
  const head = await request('/v1/products?limit=2', { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(await head.text(), '');
  t.equal(head.headers.get('link'), get.headers.get('link'));
  t.equal((await request('/v1', { method: 'HEAD' })).status, 200);
  t.equal((await request('/healthz', { method: 'HEAD' })).status, 200);
});

t.test('POST /v1/keys is the only method on /v1/keys', async (t) => {
  const { request } = await testApp(t);
  for (const method of ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']) {
    const res = await request('/v1/keys', { method });
    t.equal(res.status, 405, method);
    t.equal(res.headers.get('allow'), 'POST', method);
  }
  // …and the collections take no POST: their Allow is theirs.
  const res = await request('/v1/products', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.equal(res.status, 405);
  t.equal(res.headers.get('allow'), 'GET, HEAD');
});

t.test("every route suits Hono's RegExpRouter, so that no request falls back to the slower TrieRouter", async (t) => {
  // Hono's SmartRouter picks its router at the first request: a fixed path beside a parameter at the same
  // place (`/v1/keys` beside `/v1/:collection`) makes it fall back (lib/service/app.ts).
  for (const rateLimit of [false, true]) {
    const { app, request } = await testApp(t, { rateLimit });
    t.equal((await request('/v1/products?limit=1')).status, 200);
    t.equal(app.router.name, 'SmartRouter + RegExpRouter', `rate limiter ${rateLimit ? 'on' : 'off'}`);
  }
});
