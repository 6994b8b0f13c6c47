// CORS over a listening server: preflights answered ahead of the limiter, uncharged and without the database; answers readable cross-origin.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { chargedUnits, setTier } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';

const EXPOSED =
  'Link, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, RateLimit, RateLimit-Policy, Retry-After, ETag, X-Request-Id';

const preflight = (origin: string) => ({
  method: 'OPTIONS',
  headers: {
    origin,
    'access-control-request-method': 'GET',
    'access-control-request-headers': 'authorization, if-none-match',
  },
});

t.test('a preflight is a 204 with the allowed methods and headers, charged nothing, even with the database gone', async (t) => {
  const api = await testApp(t, { seed: { products: 3 }, rateLimit: true });
  const origin = await listening(t, api.app);
  for (const path of ['/v1/products', '/v1', '/v1/keys', '/admin/tiers', '/nowhere']) {
    const res = await fetch(`${origin}${path}`, preflight('https://app.example'));
    t.equal(res.status, 204, path);
    t.equal(res.headers.get('access-control-allow-origin'), '*', path);
    t.equal(res.headers.get('access-control-allow-methods'), 'GET,HEAD,POST,PUT,PATCH,DELETE', path);
    t.equal(res.headers.get('access-control-allow-headers'), 'Authorization,If-None-Match', path);
    t.equal(res.headers.get('access-control-max-age'), '7200', path);
    t.equal(res.headers.get('x-ratelimit-remaining'), null, `${path}: not counted, so no allowance reported`);
    t.equal(await res.text(), '', path);
  }
  t.equal(await chargedUnits(api.database.sql), 0, 'no unit charged to anyone');
  const [row] = await api.database.sql`select count(*)::int as rows from paginated_collections.rate_windows`;
  t.equal(row!.rows, 0, 'the limiter never saw them');

  // With the database closed, a GET is a 503, a preflight still a 204: it never reaches the database.
  await api.database.close();
  t.equal((await fetch(`${origin}/v1/products`)).status, 503);
  t.equal((await fetch(`${origin}/v1/products`, preflight('https://app.example'))).status, 204);
});

t.test('CORS_ORIGINS unset (*): every answer is readable from any page, with the headers a client needs exposed', async (t) => {
  const api = await testApp(t, { seed: { products: 3 }, rateLimit: true });
  const origin = await listening(t, api.app);
  for (const [path, status] of [
    ['/v1/products?limit=1', 200],
    ['/v1/products?limit=0', 400],
    ['/v1/nothing', 404],
    ['/nowhere', 404],
    ['/healthz', 200],
  ] as const) {
    const res = await fetch(`${origin}${path}`, { headers: { origin: 'https://app.example' } });
    t.equal(res.status, status, path);
    t.equal(res.headers.get('access-control-allow-origin'), '*', path);
    t.equal(res.headers.get('access-control-expose-headers'), EXPOSED, path);
    t.notMatch(res.headers.get('vary') ?? '', 'Origin', `${path}: the same answer for every origin`);
  }
  const plain = await fetch(`${origin}/v1/products?limit=1`);
  t.equal(plain.headers.get('access-control-allow-origin'), '*', 'also without Origin: a cached copy serves a page too');
});

t.test('CORS_ORIGINS lists origins: only those get the headers, and answers vary by Origin', async (t) => {
  const api = await testApp(t, {
    seed: { products: 30 },
    rateLimit: true,
    env: { CORS_ORIGINS: 'https://app.example,http://localhost:5173' },
  });
  const origin = await listening(t, api.app);
  const allowed = await fetch(`${origin}/v1/products?limit=1`, { headers: { origin: 'http://localhost:5173' } });
  t.equal(allowed.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  t.equal(allowed.headers.get('access-control-expose-headers'), EXPOSED);
  t.match(allowed.headers.get('vary'), /Origin/);
  const other = await fetch(`${origin}/v1/products?limit=1`, { headers: { origin: 'https://evil.example' } });
  t.equal(other.status, 200, 'served: CORS is the browser refusing to hand it to the page');
  t.equal(other.headers.get('access-control-allow-origin'), null);
  t.match(other.headers.get('vary'), /Origin/);
  const none = await fetch(`${origin}/v1/products?limit=1`);
  t.equal(none.headers.get('access-control-allow-origin'), null);
  t.match(none.headers.get('vary'), /Origin/, 'a cache must not give this answer to a page of an allowed origin');
  const refused = await fetch(`${origin}/v1/products`, preflight('https://evil.example'));
  t.equal(refused.status, 204);
  t.equal(refused.headers.get('access-control-allow-origin'), null, 'a preflight from another origin is not allowed');
  const granted = await fetch(`${origin}/v1/products`, preflight('https://app.example'));
  t.equal(granted.headers.get('access-control-allow-origin'), 'https://app.example');
  t.equal(
    await chargedUnits(api.database.sql),
    3,
    'three GETs of 1 unit each (one item; the count of 30 rows reads less than a unit); no preflight counted',
  );
  const large = await fetch(`${origin}/v1/products?limit=20`, { headers: { origin: 'http://localhost:5173', 'accept-encoding': 'gzip' } });
  t.equal(large.headers.get('content-encoding'), 'gzip');
  t.equal(large.headers.get('vary'), 'Origin, Accept-Encoding', 'a compressed answer varies by both');
  const again = await fetch(`${origin}/v1/products?limit=20`, {
    headers: { origin: 'http://localhost:5173', 'if-none-match': large.headers.get('etag')! },
  });
  t.equal(again.status, 304);
  t.equal(again.headers.get('vary'), 'Origin, Accept-Encoding', 'so does its 304');
  t.equal(again.headers.get('access-control-allow-origin'), 'http://localhost:5173');
});

t.test('a 429 is readable by the page too: its CORS headers, Vary, request id and Retry-After', async (t) => {
  const api = await testApp(t, {
    seed: { products: 3 },
    rateLimit: true,
    env: { CORS_ORIGINS: 'https://app.example' },
  });
  await setTier(api.database.sql, 'anonymous', { allowance: 1, windowSeconds: 600, concurrency: 4 });
  const origin = await listening(t, api.app);
  const headers = { origin: 'https://app.example', 'x-request-id': 'page-429' };
  t.equal((await fetch(`${origin}/v1/products?limit=1`, { headers })).status, 200);
  const declined = await fetch(`${origin}/v1/products?limit=1`, { headers });
  t.equal(declined.status, 429);
  t.equal(declined.headers.get('content-type'), 'application/problem+json');
  t.equal(declined.headers.get('access-control-allow-origin'), 'https://app.example');
  t.equal(declined.headers.get('access-control-expose-headers'), EXPOSED, 'Retry-After and the rate-limit headers exposed');
  t.equal(declined.headers.get('vary'), 'Origin');
  t.equal(declined.headers.get('x-request-id'), 'page-429');
  t.equal((await declined.json()).requestId, 'page-429');
  t.ok(Number(declined.headers.get('retry-after')) > 0, 'Retry-After');
  t.equal(declined.headers.get('x-ratelimit-remaining'), '0');
});
