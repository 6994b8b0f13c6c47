// What a user tries first, over a listening server: /v1/, HEAD charged like GET, count=planned, HTTP/1.0 health checks without Host.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { chargedUnits, limits } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';
import { parseRaw, rawExchange } from '../helpers/raw-http.ts';

t.test('/v1/ answers like /v1, for one unit', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const origin = await listening(t, api.app);
  const index = await fetch(`${origin}/v1`);
  const slash = await fetch(`${origin}/v1/`);
  t.equal(slash.status, 200);
  t.same(await slash.json(), await index.json());
  t.equal(slash.headers.get('link'), index.headers.get('link'));
  t.equal(limits(slash).remaining, limits(index).remaining - 1, 'one unit, like /v1');
  t.equal((await fetch(`${origin}/v1/`, { method: 'POST' })).status, 405);
});

t.test('HEAD works wherever GET does, with no body, and is charged like GET', async (t) => {
  const api = await testApp(t, { seed: { products: 120 }, rateLimit: true });
  const origin = await listening(t, api.app);
  for (const path of ['/v1/products?limit=100', '/v1/products?limit=100&count=none', '/v1', '/v1/', '/healthz', '/readyz']) {
    const before = await chargedUnits(api.database.sql);
    const get = await fetch(`${origin}${path}`);
    const getCost = (await chargedUnits(api.database.sql)) - before;
    const head = await fetch(`${origin}${path}`, { method: 'HEAD' });
    const headCost = (await chargedUnits(api.database.sql)) - before - getCost;
    t.equal(head.status, get.status, path);
    t.equal(await head.text(), '', `${path}: no body`);
    t.equal(headCost, getCost, `${path}: HEAD costs what GET does (${getCost})`);
    t.equal(head.headers.get('link'), get.headers.get('link'), `${path}: the same Link header`);
    t.equal(head.headers.get('etag'), get.headers.get('etag'), `${path}: the same ETag`);
  }
  const admin = await fetch(`${origin}/admin/tiers`, {
    method: 'HEAD',
    headers: { authorization: 'Bearer admin-token-for-tests-0123456789' },
  });
  t.equal(admin.status, 200, 'the operator API too');
});

t.test("count=planned is PostgREST's name for count=estimated", async (t) => {
  const api = await testApp(t, { seed: { products: 120 }, rateLimit: true });
  const origin = await listening(t, api.app);
  await api.database.sql`analyze demo.products`;
  const planned = await fetch(`${origin}/v1/products?limit=5&count=planned`);
  const estimated = await fetch(`${origin}/v1/products?limit=5&count=estimated`);
  t.equal(planned.status, 200);
  const [a, b] = [await planned.json(), await estimated.json()];
  t.equal(a.size, b.size, 'the same estimate');
  t.match(a._links.next.href, /count=planned/, 'links repeat it as sent');
  t.equal(limits(estimated).remaining, limits(planned).remaining - 1, 'one unit each: no exact count');
  const bad = await (await fetch(`${origin}/v1/products?count=guess`)).json();
  t.equal(bad.invalid_params[0].reason, 'must be one of exact, estimated (or planned), none');
});

t.test("HTTP/1.0 health checks without Host (HAProxy's default) get their 200; other paths still need Host", async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const origin = await listening(t, api.app);
  const port = Number(new URL(origin).port);
  for (const [path, body] of [
    ['/healthz', { status: 'ok' }],
    ['/readyz', { status: 'ready', collections: { generation: 1, hash: /^[0-9a-f]{12}$/, unavailable: [] } }],
  ] as const) {
    const answer = parseRaw(await rawExchange(port, `GET ${path} HTTP/1.0\r\n\r\n`));
    t.equal(answer.status, 200, path);
    t.match(JSON.parse(answer.body), body, path);
    t.equal(parseRaw(await rawExchange(port, `HEAD ${path} HTTP/1.0\r\n\r\n`)).status, 200, `HEAD ${path}`);
  }
  const v1 = parseRaw(await rawExchange(port, 'GET /v1 HTTP/1.0\r\n\r\n'));
  t.equal(v1.status, 400, '/v1 builds links from Host: still a 400 without one');
  t.equal(JSON.parse(v1.body).invalid_params[0].name, 'Host');
  t.equal(parseRaw(await rawExchange(port, 'GET /healthz?x=1 HTTP/1.0\r\n\r\n')).status, 400, 'only the exact health paths');
});
