// The query string is read once: the prepared reading the rate limiter's price was made from is what the
// collection request executes or refuses (lib/service/collection-request.ts).
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import { renderChunk } from '../../lib/pagination/chunk.ts';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import { execute } from '../../lib/pagination/execute.ts';
import { prepare } from '../../lib/pagination/prepare.ts';
import { createRegistry } from '../../lib/pagination/registry.ts';
import { buildApp } from '../../lib/service/app.ts';
import { testApp } from '../helpers/app.ts';
import { setTier } from '../helpers/limiter.ts';

const registry = demoRegistry();

t.test('a prepared request is served as it was read, through execute and renderChunk as the app does', async (t) => {
  const api = await testApp(t, { seed: { products: 30, orders: 30 } });
  const cursorSecret = await loadCursorSecret(api.database.drizzle, api.config.cursorSecret);
  const prepared = prepare(registry, 'products', 'limit=3&count=none', cursorSecret);
  if (prepared.kind !== 'read') throw new Error(`Unexpected refusal: ${prepared.error.detail}`);
  const collectionUrl = 'http://test.local/v1/products';
  const chunk = await execute(prepared, { database: api.database, cursorSecret }, collectionUrl);
  t.equal(chunk.items.length, 3, 'the prepared limit is served');
  const rendered = renderChunk('products', chunk, cursorSecret);
  const served = await api.request('/v1/products?limit=3&count=none');
  t.equal(await served.text(), new TextDecoder().decode(rendered.body), 'the app answers the same body');
  t.equal(served.headers.get('etag'), rendered.etag, 'with the same ETag');

  const refused = prepare(registry, 'products', 'limit=abc', cursorSecret);
  t.equal(refused.kind, 'refused', 'a 400 is prepared as a refusal');
  t.equal(refused.price.units, 1, 'priced 1');
  t.equal(prepare(registry, 'nothing', '', cursorSecret).kind, 'refused', 'so is a collection that does not exist');
});

t.test('with the limiter on, every chunk and every 400 is what the handler serves without it', async (t) => {
  const api = await testApp(t, { seed: { products: 120, orders: 60, events: 60 }, rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 60, concurrency: 100 });
  const cursorSecret = await loadCursorSecret(api.database.drizzle, api.config.cursorSecret);
  const unlimited = buildApp({ database: api.database, config: api.config, registry, cursorSecret, rateLimit: false });
  const paths = [
    '/v1/products',
    '/v1/products?page-size=20&sort=priceCents',
    '/v1/products?limit=7&offset=13&sort=-name&count=estimated',
    '/v1/products?page=2&page-size=11&category[in]=books,games',
    '/v1/products?since_id=40&page-size=9',
    '/v1/orders?page-size=5',
    '/v1/events?page-size=5',
    '/v1/products?limit=abc',
    '/v1/products?limit=1&limit=2',
    '/v1/products?cursor=forged',
  ];
  // Each path, then the next link its chunk gives (a cursor, an offset, a page), where it has one.
  const queue = [...paths];
  let followed = 0;
  while (queue.length > 0) {
    const path = queue.shift()!;
    // The same request id on both, which problem bodies carry.
    const headers = { 'x-request-id': `read-once-${followed}` };
    const [limited, plain] = await Promise.all([
      api.request(path, { headers }),
      unlimited.request(`http://test.local${path}`, { headers }),
    ]);
    t.equal(limited.status, plain.status, `${path}: same status`);
    t.equal(limited.headers.get('link'), plain.headers.get('link'), `${path}: same Link header`);
    const body = await limited.text();
    t.equal(body, await plain.text(), `${path}: same body`);
    t.ok(limited.headers.get('x-ratelimit-limit'), `${path}: counted`);
    const next = limited.status === 200 ? (JSON.parse(body)._links?.next?.href as string | undefined) : undefined;
    if (next && paths.includes(path)) {
      queue.push(next.replace(/^http:\/\/test\.local/, ''));
      followed++;
    }
  }
  t.ok(followed >= 5, `${followed} next links followed`);
});

t.test('every /v1 response carries the rate-limit headers once, whether its handler wrote them or the limiter did', async (t) => {
  const api = await testApp(t, { rateLimit: true, seed: { products: 30, orders: 30, events: 30 } });
  await setTier(api.database.sql, 'anonymous', { allowance: 1000, windowSeconds: 60, concurrency: 4 });
  const names = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit'];
  const paths = {
    '/v1/products?limit=2': 200,
    '/v1/products?page=1&page-size=2': 200,
    '/v1/orders?page-size=2': 200,
    '/v1/events?page-size=2&before=2030-01-01T00:00:00Z': 200,
    '/v1/products?limit=500': 400,
    '/v1/nothing': 404,
    '/v1': 200,
  };
  let remaining = 1000;
  for (const [path, status] of Object.entries(paths)) {
    const res = await api.request(path);
    t.equal(res.status, status, path);
    for (const name of names) {
      // A header set twice reads as both values joined by ", ".
      t.match(res.headers.get(name), /^[^,]+$/, `${path}: ${name} once`);
    }
    const now = Number(res.headers.get('x-ratelimit-remaining'));
    t.ok(now < remaining, `${path}: charged, and its headers say so (${now})`);
    remaining = now;
  }
});

t.test('a 400 is read once: the handler answers the problem the reading before the limiter found', async (t) => {
  // The products collection, counting how often a reading asks for its page sizes: once per reading of a
  // limit or page-size, whether it then succeeds or fails.
  let reads = 0;
  const products = new Proxy(registry.get('products')!, {
    get(target, property, receiver) {
      if (property === 'pageSize') reads++;
      return Reflect.get(target, property, receiver);
    },
  });
  const counted = createRegistry([products, registry.get('orders')!, registry.get('events')!]);
  const api = await testApp(t, { seed: { products: 10 }, registry: counted, rateLimit: true });
  for (const [path, status] of [
    ['/v1/products?limit=abc', 400],
    ['/v1/products?limit=5&offset=abc', 400],
    ['/v1/products?limit=5&count=none', 200],
  ] as const) {
    reads = 0;
    const res = await api.request(path);
    t.equal(res.status, status, path);
    t.equal(reads, 1, `${path}: its query read once`);
    t.ok(res.headers.get('x-ratelimit-remaining'), `${path}: and charged`);
  }
});
