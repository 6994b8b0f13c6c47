// Who is counted: keys, unknown/revoked/malformed keys, addresses, IPv6 prefixes, X-Forwarded-For; and the cost rule.
import t from 'tap';
import { requestCost } from '../lib/cost.ts';
import { addressSubject, clientSubject, parseAuthorization } from '../lib/identity.ts';
import { demoRegistry } from '../lib/registry.ts';
import { ADMIN_TOKEN, limitedApp, limits } from './helpers/limiter.ts';

t.test('addresses: IPv4 as is, IPv6 by /64, mapped IPv4 as IPv4, junk refused', async (t) => {
  t.equal(addressSubject('203.0.113.7'), '203.0.113.7');
  t.equal(addressSubject('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  t.equal(addressSubject('2001:0db8:0001:0002:ffff::1'), '2001:db8:1:2::/64');
  t.equal(addressSubject('2001:db8::1'), '2001:db8:0:0::/64');
  t.equal(addressSubject('[2001:db8:1:2::9]'), '2001:db8:1:2::/64');
  t.equal(addressSubject('fe80::1%eth0'), 'fe80:0:0:0::/64');
  t.equal(addressSubject('::ffff:198.51.100.4'), '198.51.100.4');
  t.equal(addressSubject('::1'), '0:0:0:0::/64');
  for (const junk of ['', 'localhost', '1.2.3', '999.1.1.1', '2001:db8::1::2', 'g::1', '1.2.3.4:80', ' , ']) {
    t.equal(addressSubject(junk), undefined, JSON.stringify(junk));
  }
});

t.test('X-Forwarded-For only under TRUST_PROXY, and then its last entry', async (t) => {
  t.equal(clientSubject('10.0.0.1', '203.0.113.9', false), '10.0.0.1');
  t.equal(clientSubject('10.0.0.1', '203.0.113.9', true), '203.0.113.9');
  t.equal(clientSubject('10.0.0.1', '1.1.1.1, 203.0.113.9', true), '203.0.113.9');
  t.equal(clientSubject('10.0.0.1', 'garbage', true), '10.0.0.1');
  t.equal(clientSubject(undefined, undefined, false), 'unknown');
});

t.test('Authorization: only "Bearer <well-formed key>" is a key; anything else is malformed', async (t) => {
  t.equal(parseAuthorization(undefined).kind, 'none');
  t.equal(parseAuthorization(`Bearer pck_${'a'.repeat(32)}`).kind, 'key');
  t.equal(parseAuthorization(`bearer pck_${'a'.repeat(32)}`).kind, 'key');
  for (const header of ['', 'Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', `Bearer pck_${'a'.repeat(31)}`, 'Bearer a b', `Token pck_${'a'.repeat(32)}`]) {
    t.equal(parseAuthorization(header).kind, 'malformed', JSON.stringify(header));
  }
});

t.test('cost: by page size and exact counts, leniently; malformed costs 1', async (t) => {
  const products = demoRegistry().get('products')!;
  const orders = demoRegistry().get('orders')!;
  const cases: [string, number][] = [
    ['', 2], // 20 items (1 unit) + exact count (1)
    ['count=none', 1],
    ['count=estimated&limit=100', 2],
    ['limit=100', 3],
    ['limit=51&offset=10', 3],
    ['limit=50', 2],
    ['page=3&page-size=100', 3],
    ['page-size=100', 2], // the keyset variant: no count
    ['cursor=abc&page-size=100', 2],
    ['limit=abc', 1],
    ['limit=0', 1],
    ['limit=101', 1],
    ['limit=1&limit=2', 1],
    ['limit=10&page-size=10', 1],
    ['count=maybe', 1],
    ['%zz', 1],
  ];
  for (const [query, cost] of cases) t.equal(requestCost(products, query), cost, query);
  t.equal(requestCost(orders, ''), 1, 'orders: cursor by default, no count');
  t.equal(requestCost(orders, 'page-size=100'), 2);
  t.equal(requestCost(undefined, 'limit=100'), 1);
});

t.test('Remaining goes down by the cost; a request never costs more than the allowance', async (t) => {
  const api = await limitedApp(t);
  await api.setTier('anonymous', 10, 60, 4);
  t.equal(limits(await api.request('/v1/products?limit=100')).remaining, 7);
  t.equal(limits(await api.request('/v1/products')).remaining, 5);
  t.equal(limits(await api.request('/v1/products?limit=bad')).remaining, 4);
  await api.setTier('anonymous', 2, 60, 4);
  t.equal((await api.request('/v1/products?limit=100', { address: '192.0.2.50' })).status, 200, 'cost 3 capped at 2');
  const res = await api.request('/v1/products?limit=100', { address: '192.0.2.50' });
  t.equal(res.status, 429);
  t.equal(limits(res).remaining, 0);
});

t.test('unknown, revoked and malformed keys: 401 invalid_api_key, counted against the IP', async (t) => {
  const api = await limitedApp(t);
  await api.setTier('anonymous', 4, 60, 4);
  const issued = await (await api.request('/v1/keys', { method: 'POST' })).json();
  const headers = (value: string) => ({ headers: { authorization: value } });
  const unknown = await api.request('/v1', headers(`Bearer pck_${'Z'.repeat(32)}`));
  t.equal(unknown.status, 401);
  t.equal((await unknown.json()).code, 'invalid_api_key');
  t.equal(limits(unknown).limit, 4, 'the anonymous tier reports');
  t.equal(limits(unknown).remaining, 3, 'the IP was charged');
  const malformed = await api.request('/v1', headers('Basic Zm9vOmJhcg=='));
  t.equal(malformed.status, 401);
  t.equal(limits(malformed).remaining, 2);

  const good = await api.request('/v1', headers(`Bearer ${issued.key}`));
  t.equal(good.status, 200);
  t.equal(limits(good).limit, 600, 'the key counts on its own tier');
  const revoke = await api.request(`/admin/keys/${issued.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  t.equal(revoke.status, 204);
  const revoked = await api.request('/v1', headers(`Bearer ${issued.key}`));
  t.equal(revoked.status, 401);
  t.equal(limits(revoked).remaining, 1);
  await api.request('/v1');
  const over = await api.request('/v1', headers('Bearer nonsense'));
  t.equal(over.status, 429, 'once the IP is over, a bad key is a 429 too');
  t.equal((await over.json()).code, 'Request_limit_exceeded');
});

t.test('no Authorization header, however odd, gets a 500', async (t) => {
  const api = await limitedApp(t);
  const odd = ['Bearer \u00ff\u00fe', 'Bearer ' + 'x'.repeat(10_000), 'Bearer\tpck_x', '  ', 'Bearer pck_' + '\u00e9'.repeat(32)];
  for (const value of odd) {
    const res = await api.request('/v1', { headers: { authorization: value } });
    t.equal(res.status, 401, JSON.stringify(value.slice(0, 20)));
  }
});

t.test('X-Forwarded-For is ignored without TRUST_PROXY and honoured with it', async (t) => {
  const plain = await limitedApp(t);
  await plain.setTier('anonymous', 2, 60, 4);
  for (const spoof of ['198.51.100.1', '198.51.100.2', '198.51.100.3']) {
    await plain.request('/v1', { headers: { 'x-forwarded-for': spoof } });
  }
  t.equal(
    (await plain.request('/v1', { headers: { 'x-forwarded-for': '198.51.100.4' } })).status,
    429,
    'a spoofed header does not buy a new allowance',
  );

  const proxied = await limitedApp(t, { env: { TRUST_PROXY: 'true' } });
  await proxied.setTier('anonymous', 2, 60, 4);
  for (let i = 0; i < 2; i++) await proxied.request('/v1', { headers: { 'x-forwarded-for': '198.51.100.1' } });
  t.equal((await proxied.request('/v1', { headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 429);
  t.equal((await proxied.request('/v1', { headers: { 'x-forwarded-for': '198.51.100.2' } })).status, 200, 'another client behind the proxy');
  t.equal(
    (await proxied.request('/v1', { headers: { 'x-forwarded-for': '6.6.6.6, 198.51.100.1' } })).status,
    429,
    'the entry the proxy appended is the one that counts',
  );
});

t.test('IPv6 clients are grouped by /64', async (t) => {
  const api = await limitedApp(t);
  await api.setTier('anonymous', 2, 60, 4);
  t.equal((await api.request('/v1', { address: '2001:db8:5:6::1' })).status, 200);
  t.equal((await api.request('/v1', { address: '2001:db8:5:6:ffff::2' })).status, 200);
  t.equal((await api.request('/v1', { address: '2001:db8:5:6:1234:5678:9abc:def0' })).status, 429, 'same /64');
  t.equal((await api.request('/v1', { address: '2001:db8:5:7::1' })).status, 200, 'another /64');
  t.equal((await api.request('/v1', { address: '::ffff:192.0.2.99' })).status, 200);
  t.equal((await api.request('/v1', { address: '192.0.2.99' })).status, 200, 'mapped IPv4 is the IPv4 address');
  t.equal((await api.request('/v1', { address: '192.0.2.99' })).status, 429);
});
