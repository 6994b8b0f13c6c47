// Auth over a listening server: every 401 carries WWW-Authenticate: Bearer; `Authorization: token <key>` (octokit's form) works as Bearer.
import t from 'tap';
import { ADMIN_TOKEN, testApp } from '../helpers/app.ts';
import { limits } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';

t.test('every 401 carries a Bearer challenge', async (t) => {
  const api = await testApp(t, { seed: { products: 3 }, rateLimit: true });
  const origin = await listening(t, api.app);
  for (const authorization of ['Bearer pck_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'Basic dXNlcjpwYXNz', 'token nope']) {
    const res = await fetch(`${origin}/v1/products`, { headers: { authorization } });
    t.equal(res.status, 401, authorization);
    t.equal(res.headers.get('www-authenticate'), 'Bearer realm="api", error="invalid_token"', authorization);
    t.equal((await res.json()).code, 'invalid_api_key');
  }
  const admin = await fetch(`${origin}/admin/tiers`);
  t.equal(admin.status, 401);
  t.equal(admin.headers.get('www-authenticate'), 'Bearer realm="admin"');
  const wrong = await fetch(`${origin}/admin/tiers`, { headers: { authorization: 'Bearer wrong-token-0123456789' } });
  t.equal(wrong.status, 403, 'a wrong token is a 403, which needs no challenge');
  t.equal(wrong.headers.get('www-authenticate'), null);
});

t.test('Authorization: token <key> is a key, like Bearer; the admin API takes it too', async (t) => {
  const api = await testApp(t, { seed: { products: 3 }, rateLimit: true });
  const origin = await listening(t, api.app);
  const { key } = await (await fetch(`${origin}/v1/keys`, { method: 'POST' })).json();
  for (const authorization of [`token ${key}`, `Token ${key}`, `Bearer ${key}`]) {
    const res = await fetch(`${origin}/v1/products?count=none`, { headers: { authorization } });
    t.equal(res.status, 200, authorization.split(' ')[0]!);
    t.equal(limits(res).limit, 600, `${authorization.split(' ')[0]}: counted on the key's free tier`);
  }
  const tiers = await fetch(`${origin}/admin/tiers`, { headers: { authorization: `token ${ADMIN_TOKEN}` } });
  t.equal(tiers.status, 200);
});
