// The document and the service cannot drift apart: real responses of every collection and variant, and real
// errors (400, 401, 403, 404, 413, 429), validate against GET /openapi.json's own schemas (Ajv, JSON Schema 2020-12);
// every parameter it documents is taken and no other variant parameter is; /openapi.json and /docs are not rate-limited.
import t, { type Test } from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import { variantParams } from '../../lib/pagination/variant-params.ts';
import { ADMIN_TOKEN, pathOf, type TestApp, testApp } from '../helpers/app.ts';
import { setTier } from '../helpers/limiter.ts';
import { documentChecker } from '../helpers/openapi.ts';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const seed = { products: 60, orders: 60, events: 60 };

/** Requests `url` and checks the answer against the document's `method` `path`; returns the parsed body. */
async function checked(
  t: Test,
  api: TestApp,
  checker: ReturnType<typeof documentChecker>,
  path: string,
  url: string,
  init: RequestInit = {},
  expect?: { status?: number; matched?: string },
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await api.request(url, init);
  const text = await res.text();
  const body = text === '' ? undefined : JSON.parse(text);
  const method = init.method ?? 'GET';
  const result = checker.check(method, path, { status: res.status, headers: res.headers, body });
  t.same(result.errors, [], `${method} ${url} → ${res.status} is as documented`);
  if (expect?.status !== undefined) t.equal(res.status, expect.status, `${method} ${url} answers ${expect.status}`, { body });
  if (expect?.matched !== undefined) t.equal(result.matched, expect.matched, `${url} is a ${expect.matched}`);
  return { status: res.status, body, headers: res.headers };
}

t.test('every collection and variant, and every other path, answers as the document says', async (t) => {
  const api = await testApp(t, { seed, rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 100_000, windowSeconds: 60, concurrency: 10 });
  const docRes = await api.request('/openapi.json');
  t.equal(docRes.status, 200);
  t.match(docRes.headers.get('content-type'), /^application\/json/);
  const document = await docRes.json();
  const checker = documentChecker(document);
  const check = (path: string, url: string, init?: RequestInit, expect?: { status?: number; matched?: string }) =>
    checked(t, api, checker, path, url, init, expect);

  // Each variant of each collection: its first chunk, then its links followed, count modes and directions.
  const firstChunks: Record<string, string[]> = {
    offset: ['?limit=25', '?limit=25&offset=50&count=none', '?limit=10&count=estimated&sort=-priceCents'],
    page: ['?page=0&page-size=25', '?page=1&page-size=25&count=none'],
    cursor: ['?since_id=0&page-size=25'],
    time: ['?page-size=25', '?page-size=25&after=2000-01-01T00:00:00Z', '?page-size=25&before=2999-01-01T00:00:00Z'],
  };
  for (const collection of demoRegistry().values()) {
    const path = `/v1/${collection.name}`;
    for (const variant of collection.variants) {
      const matched = `${collection.name[0]!.toUpperCase()}${collection.name.slice(1)}${variant[0]!.toUpperCase()}${variant.slice(1)}Chunk`;
      for (const query of firstChunks[variant]!) {
        let url: string | undefined = `${path}${query}`;
        for (let hop = 0; url !== undefined && hop < 4; hop++) {
          const { body } = await check(path, url, {}, { status: 200, matched });
          t.equal(body[collection.name].length > 0 || hop > 0, true, `${url} has items`);
          url = body._links.next
            ? pathOf(body._links.next.href)
            : body._links.poll && hop === 0
              ? pathOf(body._links.poll.href)
              : undefined;
        }
      }
    }
    // A chunk asked again with its tag: the 304, as documented (its tag, cache headers, allowance and request id).
    const { headers: tagged } = await check(path, `${path}?page-size=2`, {}, { status: 200 });
    await check(path, `${path}?page-size=2`, { headers: { 'if-none-match': tagged.get('etag')! } }, { status: 304 });
    await check(path, `${path}?limit=500`, {}, { status: 400 });
    await check(path, `${path}?cursor=v1.forged.x`, {}, { status: 400 });
    await check(path, `${path}?page-size=2`, { headers: { authorization: 'Bearer pck_notakey' } }, { status: 401 });
  }

  await check('/', '/', {}, { status: 200 });
  // Links whose origin would be over 300 characters: the root's 400, as documented.
  const longHost = await api.app.request(`http://${'h'.repeat(300)}.test/`);
  t.equal(longHost.status, 400);
  t.same(
    checker.check('GET', '/', { status: 400, headers: longHost.headers, body: await longHost.json() }).errors,
    [],
    'GET / → 400 as documented',
  );
  await check('/v1', '/v1', {}, { status: 200 });
  await check('/healthz', '/healthz', {}, { status: 200 });
  await check('/readyz', '/readyz', {}, { status: 200 });
  const { body: issued } = await check('/v1/keys', '/v1/keys', { method: 'POST', body: '{"name":"docs"}' }, { status: 201 });
  await check('/v1/keys', '/v1/keys', { method: 'POST', body: '{"nom":"docs"}' }, { status: 400 });
  await check('/v1/keys', '/v1/keys', { method: 'POST', body: 'x'.repeat(5000) }, { status: 413 });
  await check('/v1/products', '/v1/products?limit=2', { headers: { authorization: `Bearer ${issued.key}` } }, { status: 200 });

  await check('/admin/tiers', '/admin/tiers', { headers: admin }, { status: 200 });
  await check('/admin/tiers', '/admin/tiers', {}, { status: 401 });
  await check('/admin/tiers', '/admin/tiers', { headers: { authorization: 'Bearer wrong' } }, { status: 403 });
  const tier = JSON.stringify({ limit: 10, windowSeconds: 60, concurrency: 2 });
  await check('/admin/tiers/{name}', '/admin/tiers/team', { method: 'PUT', headers: admin, body: tier }, { status: 201 });
  await check('/admin/tiers/{name}', '/admin/tiers/team', { method: 'PUT', headers: admin, body: tier }, { status: 200 });
  await check('/admin/tiers/{name}', '/admin/tiers/team', { method: 'PUT', headers: admin, body: '{"limit":0}' }, { status: 400 });
  const move = JSON.stringify({ tier: 'team' });
  await check('/admin/keys/{id}', `/admin/keys/${issued.id}`, { method: 'PATCH', headers: admin, body: move }, { status: 200 });
  await check('/admin/keys/{id}', '/admin/keys/key_nosuchkey', { method: 'PATCH', headers: admin, body: move }, { status: 404 });
  await check('/admin/keys/{id}', `/admin/keys/${issued.id}`, { method: 'DELETE', headers: admin }, { status: 204 });
  await check('/admin/keys/{id}', `/admin/keys/${issued.id}`, { method: 'DELETE', headers: admin }, { status: 404 });
  const scoped = JSON.stringify({ name: 'tenant', tier: 'team', collections: ['orders'], claims: { tenant: 1, groups: ['a'] } });
  const { body: made } = await check('/admin/keys', '/admin/keys', { method: 'POST', headers: admin, body: scoped }, { status: 201 });
  await check('/admin/keys', '/admin/keys', { method: 'POST', headers: admin, body: '{"tier":"team","claims":[]}' }, { status: 400 });
  await check('/admin/keys/{id}', `/admin/keys/${made.id}`, { headers: admin }, { status: 200 });
  await check('/admin/keys/{id}', `/admin/keys/${issued.id}`, { headers: admin }, { status: 200 }); // revoked: with revokedAt
  await check('/admin/keys/{id}', '/admin/keys/key_nosuchkey', { headers: admin }, { status: 404 });
  const rescope = JSON.stringify({ collections: null, claims: {} });
  await check('/admin/keys/{id}', `/admin/keys/${made.id}`, { method: 'PATCH', headers: admin, body: rescope }, { status: 200 });
  await check('/admin/keys/{id}', `/admin/keys/${made.id}`, { method: 'PATCH', headers: admin, body: '{}' }, { status: 400 });

  // An unknown path has no operation: its 404 is the shared problem schema.
  const missing = await api.request('/v1/nope');
  t.equal(missing.status, 404);
  t.same(checker.validate('Problem', await missing.json()), [], 'a 404 of an unknown path is a Problem');

  // The allowance used up: a 429 Request_limit_exceeded with Retry-After, as documented.
  await setTier(api.database.sql, 'anonymous', { allowance: 1, windowSeconds: 60, concurrency: 10 });
  await api.request('/v1/orders?page-size=2', { address: '192.0.2.77' });
  const { body: limited } = await check('/v1/orders', '/v1/orders?page-size=2', { address: '192.0.2.77' } as RequestInit, { status: 429 });
  t.equal(limited.code, 'Request_limit_exceeded');
});

t.test('HEAD is answered wherever GET is, as the document describes it: the GET’s status and headers, no body', async (t) => {
  const api = await testApp(t, { seed: { products: 5, orders: 5, events: 5 }, rateLimit: true });
  const document = await (await api.request('/openapi.json')).json();
  const checker = documentChecker(document);
  const urls: Record<string, string> = { '/admin/tiers': '/admin/tiers', '/metrics': '/metrics' };
  const described = Object.keys(document.paths).filter((path) => document.paths[path].get !== undefined);
  t.ok(described.length >= 9, 'every GET path');
  for (const path of described) {
    t.ok(document.paths[path].head, `HEAD ${path} is described`);
    const init = { method: 'HEAD', headers: path === '/admin/tiers' || path === '/metrics' ? admin : {} };
    const [head, get] = [await api.request(urls[path] ?? path, init), await api.request(urls[path] ?? path, { ...init, method: 'GET' })];
    t.equal(head.status, get.status, `HEAD ${path}: the GET's status`);
    t.equal(await head.text(), '', `HEAD ${path}: no body`);
    await get.arrayBuffer();
    const result = checker.check('HEAD', path, { status: head.status, headers: head.headers, body: undefined });
    t.same(result.errors, [], `HEAD ${path} → ${head.status} is as documented`);
  }
  // A chunk's HEAD is charged what its GET is.
  const remaining = async (method: string) =>
    Number((await api.request('/v1/products?limit=100', { method })).headers.get('x-ratelimit-remaining'));
  const before = await remaining('GET');
  const afterHead = await remaining('HEAD');
  const afterGet = await remaining('GET');
  t.equal(before - afterHead, afterHead - afterGet, 'HEAD and GET cost the same');
  t.ok(before - afterHead > 0, 'and HEAD costs something');
});

t.test('every parameter the document gives a collection is taken, and no other variant parameter', async (t) => {
  const api = await testApp(t, { seed: { products: 5, orders: 5, events: 5 } });
  const document = await (await api.request('/openapi.json')).json();
  const checker = documentChecker(document);
  const allParams = new Set(Object.values(variantParams).flatMap((entry) => entry.takes));
  for (const collection of demoRegistry().values()) {
    const path = `/v1/${collection.name}`;
    const parameters: any[] = document.paths[path].get.parameters.filter((p: any) => p.in === 'query');
    for (const parameter of parameters) {
      if (parameter.name === 'cursor') continue; // only ever taken from a link: followed in the test above
      // Every value of an enum; otherwise the schema's example, or its least value.
      const values: unknown[] = parameter.schema.enum ?? [parameter.schema.examples?.[0] ?? parameter.schema.minimum ?? 1];
      for (const value of values) {
        t.same(checker.validate(parameter.schema, value), [], `${collection.name}: ${parameter.name}=${value} fits its own schema`);
        const res = await api.request(`${path}?${encodeURIComponent(parameter.name)}=${encodeURIComponent(String(value))}`);
        t.equal(res.status, 200, `${collection.name} takes ${parameter.name}=${value}`, { body: await res.text() });
      }
    }
    const documented = new Set(parameters.map((p) => p.name));
    for (const name of allParams) {
      if (documented.has(name)) continue;
      const res = await api.request(`${path}?${name}=1`);
      t.equal(res.status, 400, `${collection.name} refuses ${name}, which its document leaves out`);
    }
  }
});

t.test('the description, the docs page and its assets are not rate-limited; /v1 and chunks link to them', async (t) => {
  const api = await testApp(t, { seed: { products: 3 }, rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 1, windowSeconds: 3600, concurrency: 10 });
  for (const path of ['/openapi.json', '/docs', '/docs/init.js', '/docs/swagger-ui.css', '/docs/swagger-ui-bundle.js', '/']) {
    for (let n = 0; n < 3; n++) {
      const res = await api.request(path);
      await res.arrayBuffer();
      t.equal(res.status, 200, `${path} #${n + 1}`);
      t.equal(res.headers.get('x-ratelimit-remaining'), null, `${path} is not counted`);
    }
  }
  const page = await (await api.request('/docs')).text();
  t.match(page, '<script src="/docs/swagger-ui-bundle.js">');
  t.notMatch(page, /https?:\/\//, 'the page names no other origin');
  t.match((await api.request('/docs/swagger-ui-bundle.js')).headers.get('content-type'), 'text/javascript');
  const missing = await api.request('/docs/__proto__');
  t.equal(missing.status, 404, 'no asset but the ones listed');
  t.equal(missing.headers.get('content-type'), 'application/problem+json');
  for (const path of ['/', '/openapi.json', '/docs']) {
    const res = await api.request(path, { method: 'POST' });
    t.equal(res.status, 405, `POST ${path} is a 405`);
    t.equal(res.headers.get('allow'), 'GET, HEAD');
  }

  const root = await api.json('/');
  t.same(Object.keys(root.body._links), ['self', 'api', 'service-doc', 'service-desc']);
  t.equal(root.body._links['service-desc'].href, 'http://test.local/openapi.json');
  const serviceLinks = '</openapi.json>; rel="service-desc", </docs>; rel="service-doc"';
  const index = await api.request('/v1');
  t.ok(index.headers.get('link')!.endsWith(serviceLinks), 'GET /v1 links the description and the docs page');
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 3600, concurrency: 10 });
  const chunk = await api.request('/v1/products?limit=1');
  t.ok(chunk.headers.get('link')!.endsWith(serviceLinks), 'a chunk links them');
  t.match(chunk.headers.get('link'), /rel="next", <[^>]+>; rel="first"/, 'after its own links');
});
