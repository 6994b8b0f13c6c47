// X-Request-Id over a listening server: on every answer, the client's own when sane, and in every problem body.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { listening } from '../helpers/listening.ts';
import { parseRaw, rawExchange } from '../helpers/raw-http.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

t.test("every answer carries an id: a new UUID, or the client's own when it is sane", async (t) => {
  const api = await testApp(t, { seed: { products: 3 }, rateLimit: true });
  const origin = await listening(t, api.app);
  const seen = new Set<string>();
  for (const path of ['/v1/products', '/v1', '/healthz', '/readyz', '/admin/tiers', '/nowhere', '/v1/products?limit=0']) {
    const id = (await fetch(`${origin}${path}`)).headers.get('x-request-id')!;
    t.match(id, UUID, path);
    seen.add(id);
  }
  t.equal(seen.size, 7, 'a fresh one each time');
  for (const own of ['abc-123', 'Root=1-67891233-abcdef012345678912345678', 'a'.repeat(128), 'ZXhhbXBsZQ+/=', '01J9Z3K4X5:req.7']) {
    t.equal((await fetch(`${origin}/v1/products`, { headers: { 'x-request-id': own } })).headers.get('x-request-id'), own, own);
  }
  for (const insane of ['a'.repeat(129), 'has space', 'semi;colon', '<script>', '"quoted"']) {
    const id = (await fetch(`${origin}/v1/products`, { headers: { 'x-request-id': insane } })).headers.get('x-request-id');
    t.match(id, UUID, `${insane.slice(0, 20)} is replaced, never echoed`);
  }
});

t.test('problem bodies carry the id of their answer, from the app, the adapter and the parser', async (t) => {
  const api = await testApp(t, { seed: { products: 3 }, rateLimit: true });
  const origin = await listening(t, api.app);
  for (const [path, init, status] of [
    ['/v1/products?limit=0', {}, 400],
    ['/v1/nothing', {}, 404],
    ['/nowhere', {}, 404],
    ['/v1/products', { method: 'DELETE' }, 405],
    ['/v1/products', { headers: { authorization: 'Bearer pck_unknown' } }, 401],
    ['/admin/tiers', {}, 401],
  ] as const) {
    const res = await fetch(`${origin}${path}`, {
      ...init,
      headers: { 'x-request-id': `id-${status}`, ...('headers' in init ? init.headers : {}) },
    });
    t.equal(res.status, status, path);
    t.equal(res.headers.get('x-request-id'), `id-${status}`, path);
    t.equal((await res.json()).requestId, `id-${status}`, `${path}: the body names it too`);
  }
  const port = Number(new URL(origin).port);
  // No Host on /v1: the adapter refuses it (a 400 naming Host) before the app runs.
  const hostless = parseRaw(await rawExchange(port, 'GET /v1/products HTTP/1.0\r\n\r\n'));
  t.equal(hostless.status, 400);
  t.match(hostless.header('x-request-id'), UUID);
  t.equal(JSON.parse(hostless.body).requestId, hostless.header('x-request-id'));
  // A control byte in the URL: node's parser refuses it, answered by the clientError listener.
  const malformed = parseRaw(await rawExchange(port, 'GET /v1/pro\x01ducts HTTP/1.1\r\nHost: x\r\n\r\n'));
  t.equal(malformed.status, 400);
  t.match(malformed.header('x-request-id'), UUID);
  t.equal(JSON.parse(malformed.body).requestId, malformed.header('x-request-id'));
});
