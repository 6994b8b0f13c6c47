// Who is counted: keys, unknown/revoked/malformed keys, addresses, IPv6 prefixes, X-Forwarded-For; and the cost rule.
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import type { TrustProxy } from '../../lib/http/forwarding.ts';
import { addressSubject, clientSubject, parseAuthorization } from '../../lib/ratelimit/identity.ts';
import { ADMIN_TOKEN, type TestApp, testApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';
import { limits, setTier } from '../helpers/limiter.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

t.test('addresses: IPv4 as is, IPv6 by /64, mapped IPv4 as IPv4, junk refused', async (t) => {
  t.equal(addressSubject('203.0.113.7'), '203.0.113.7');
  t.equal(addressSubject('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  t.equal(addressSubject('2001:0db8:0001:0002:ffff::1'), '2001:db8:1:2::/64');
  t.equal(addressSubject('2001:db8::1'), '2001:db8:0:0::/64');
  t.equal(addressSubject('fe80::1%eth0'), 'fe80:0:0:0::/64');
  t.equal(addressSubject('::ffff:198.51.100.4'), '198.51.100.4');
  t.equal(addressSubject('::1'), '0:0:0:0::/64');
  for (const junk of [
    '',
    'localhost',
    '1.2.3',
    '999.1.1.1',
    '2001:db8::1::2',
    'g::1',
    '1.2.3.4:80',
    ' , ',
    '[2001:db8:1:2::9]',
    '1',
    '0x7f.1',
    '127.1',
    'unknown',
  ]) {
    t.equal(addressSubject(junk), undefined, JSON.stringify(junk));
  }
});

t.test('X-Forwarded-For counts only from a trusted proxy: hop counts, addresses, CIDRs, IPv6, mapped IPv4', async (t) => {
  const none: TrustProxy = { kind: 'none' };
  const one: TrustProxy = { kind: 'hops', hops: 1 };
  const two: TrustProxy = { kind: 'hops', hops: 2 };
  const proxies: TrustProxy = { kind: 'addresses', addresses: ['10.0.0.0/8', '2001:db8:ffff::/48', '198.51.100.10'] };
  t.equal(clientSubject('10.0.0.1', '203.0.113.9', none), '10.0.0.1', 'no trust: the socket');
  t.equal(clientSubject(undefined, undefined, none), 'unknown');
  t.equal(clientSubject('10.0.0.1', '1.1.1.1, 203.0.113.9', one), '203.0.113.9', 'one hop: the entry the proxy appended');
  t.equal(clientSubject('10.0.0.1', '1.1.1.1, 203.0.113.9', two), '1.1.1.1', 'two hops: one entry further');
  t.equal(clientSubject('10.0.0.1', '203.0.113.9', two), '203.0.113.9', 'fewer entries than hops: the leftmost');
  t.equal(clientSubject('10.1.2.3', '6.6.6.6, 203.0.113.9', proxies), '203.0.113.9', 'a peer in a trusted CIDR');
  t.equal(clientSubject('10.1.2.3', '6.6.6.6, 203.0.113.9, 10.9.9.9', proxies), '203.0.113.9', 'trusted proxies in the chain are skipped');
  t.equal(clientSubject('198.51.100.11', '203.0.113.9', proxies), '198.51.100.11', 'a peer that is not a proxy: its own address');
  t.equal(clientSubject('203.0.113.50', '1.2.3.4', proxies), '203.0.113.50', 'a direct client cannot choose its address');
  t.equal(clientSubject('::ffff:10.0.0.7', '203.0.113.9', proxies), '203.0.113.9', 'an IPv4-mapped peer matches the IPv4 CIDR');
  t.equal(clientSubject('::ffff:203.0.113.50', '1.2.3.4', proxies), '203.0.113.50', 'a mapped direct client is its IPv4 address');
  t.equal(clientSubject('2001:db8:ffff:1::1', '2001:db8:5:6::7', proxies), '2001:db8:5:6::/64', 'an IPv6 proxy and client');
  t.equal(clientSubject('2001:db8:fffe::1', '2001:db8:5:6::7', proxies), '2001:db8:fffe:0::/64', 'outside the IPv6 CIDR');
  t.equal(clientSubject('10.0.0.1', '::ffff:203.0.113.9', proxies), '203.0.113.9', 'a mapped client entry is IPv4');
  t.equal(clientSubject('10.0.0.1', ' , ', proxies), '10.0.0.1', 'an empty header: the proxy itself');
  for (const junk of ['garbage', '1.2.3.4, garbage', '203.0.113.9:4711', '[2001:db8::1]', 'unknown']) {
    t.throws(
      () => clientSubject('10.0.0.1', junk, proxies),
      { status: 400, code: 'invalid_parameter', options: { invalidParams: [{ name: 'X-Forwarded-For' }] } },
      junk,
    );
  }
  t.equal(clientSubject('10.0.0.1', 'garbage, 203.0.113.9', proxies), '203.0.113.9', 'junk further left than the client is never read');
  t.equal(clientSubject('203.0.113.50', 'garbage', proxies), '203.0.113.50', 'junk from an untrusted peer is ignored');
});

t.test('Authorization: only "Bearer <well-formed key>" is a key; anything else is malformed', async (t) => {
  t.equal(parseAuthorization(undefined).kind, 'none');
  t.equal(parseAuthorization(`Bearer pck_${'a'.repeat(32)}`).kind, 'key');
  t.equal(parseAuthorization(`bearer pck_${'a'.repeat(32)}`).kind, 'key');
  for (const header of [
    '',
    'Bearer',
    'Bearer ',
    'Basic dXNlcjpwYXNz',
    `Bearer pck_${'a'.repeat(31)}`,
    'Bearer a b',
    `Tokens pck_${'a'.repeat(32)}`,
  ]) {
    t.equal(parseAuthorization(header).kind, 'malformed', JSON.stringify(header));
  }
});

t.test('Remaining goes down by the cost; a request that costs more than the allowance is refused as such', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 10, windowSeconds: 60, concurrency: 4 });
  t.equal(limits(await api.request('/v1/products?limit=100&offset=10000')).remaining, 7);
  t.equal(limits(await api.request('/v1/products')).remaining, 6);
  t.equal(limits(await api.request('/v1/products?limit=bad')).remaining, 5);
  await setTier(api.database.sql, 'anonymous', { allowance: 2, windowSeconds: 60, concurrency: 4 });
  const deep = '/v1/products?limit=100&offset=10000';
  const res = await api.request(deep, { address: '192.0.2.50' });
  t.equal(res.status, 403, 'cost 3 over an allowance of 2: it could never be paid');
  t.equal(limits(res).remaining, 2, 'nothing charged');
});

t.test('unknown, revoked and malformed keys: 401 invalid_api_key, counted against the IP', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 4, windowSeconds: 60, concurrency: 4 });
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
  const api = await testApp(t, { rateLimit: true });
  const odd = ['Bearer \u00ff\u00fe', `Bearer ${'x'.repeat(10_000)}`, 'Bearer\tpck_x', '  ', `Bearer pck_${'\u00e9'.repeat(32)}`];
  for (const value of odd) {
    const res = await api.request('/v1', { headers: { authorization: value } });
    t.equal(res.status, 401, JSON.stringify(value.slice(0, 20)));
  }
});

t.test('X-Forwarded-For counts only from the proxies TRUST_PROXY names', async (t) => {
  const plain = await testApp(t, { rateLimit: true });
  await setTier(plain.database.sql, 'anonymous', { allowance: 2, windowSeconds: 60, concurrency: 4 });
  for (const spoof of ['198.51.100.1', '198.51.100.2', '198.51.100.3']) {
    await plain.request('/v1', { headers: { 'x-forwarded-for': spoof } });
  }
  t.equal(
    (await plain.request('/v1', { headers: { 'x-forwarded-for': '198.51.100.4' } })).status,
    429,
    'without TRUST_PROXY a spoofed header does not buy a new allowance',
  );

  const proxied = await testApp(t, { env: { TRUST_PROXY: '10.0.0.0/24, 2001:db8:ffff::/48' }, rateLimit: true });
  await setTier(proxied.database.sql, 'anonymous', { allowance: 2, windowSeconds: 60, concurrency: 4 });
  const direct = '203.0.113.50';
  const forged = (i: number) => ({ address: direct, headers: { 'x-forwarded-for': `198.51.100.${i}` } });
  t.equal((await proxied.request('/v1', forged(1))).status, 200);
  t.equal((await proxied.request('/v1', forged(2))).status, 200);
  const third = await proxied.request('/v1', forged(3));
  t.equal(third.status, 429, 'a direct client forging X-Forwarded-For draws on its own address');
  t.same(await chargedSubjects(proxied), ['ip:203.0.113.50'], 'only the socket address was charged');

  const viaProxy = (client: string, proxy = '10.0.0.1') => ({ address: proxy, headers: { 'x-forwarded-for': client } });
  for (let i = 0; i < 2; i++) t.equal((await proxied.request('/v1', viaProxy('198.51.100.1'))).status, 200);
  t.equal((await proxied.request('/v1', viaProxy('198.51.100.1', '10.0.0.2'))).status, 429, 'through another trusted proxy, same client');
  t.equal((await proxied.request('/v1', viaProxy('198.51.100.2'))).status, 200, 'another client behind the proxy');
  t.equal((await proxied.request('/v1', viaProxy('6.6.6.6, 198.51.100.1'))).status, 429, 'the entry the proxy appended counts');
  t.equal((await proxied.request('/v1', viaProxy('2001:db8:5:6::1', '2001:db8:ffff::9'))).status, 200, 'an IPv6 proxy and client');
  t.equal((await proxied.request('/v1', viaProxy('2001:db8:5:6::2', '::ffff:10.0.0.3'))).status, 200, 'an IPv4-mapped proxy');
  t.equal((await proxied.request('/v1', viaProxy('2001:db8:5:6:ffff::3'))).status, 429, 'the same /64 through either proxy');

  // A malformed entry from a trusted proxy: a 400 naming the header, charged to nobody.
  const before = await proxied.database.sql`select subject, used from paginated_collections.rate_windows order by subject`;
  for (const junk of ['not-an-ip', '198.51.100.9, 300.1.1.1', '198.51.100.9:4711', 'unknown']) {
    const res = await proxied.request('/v1', viaProxy(junk));
    t.equal(res.status, 400, junk);
    t.equal(res.headers.get('content-type'), 'application/problem+json');
    const problem = await res.json();
    t.equal(problem.code, 'invalid_parameter');
    t.equal(problem.invalid_params[0].name, 'X-Forwarded-For');
  }
  t.same(
    await proxied.database.sql`select subject, used from paginated_collections.rate_windows order by subject`,
    before,
    'no row of rate_windows changed',
  );
  const subjects = await chargedSubjects(proxied);
  t.notOk(subjects.includes('ip:10.0.0.1'), `the proxy address has no bucket: ${subjects.join(', ')}`);

  const hops = await testApp(t, { env: { TRUST_PROXY: '2' }, rateLimit: true });
  await setTier(hops.database.sql, 'anonymous', { allowance: 1, windowSeconds: 60, concurrency: 4 });
  t.equal((await hops.request('/v1', viaProxy('198.51.100.1, 10.0.0.9', '192.0.2.200'))).status, 200);
  t.equal(
    (await hops.request('/v1', viaProxy('198.51.100.1, 10.0.0.8', '192.0.2.201'))).status,
    429,
    'two hops: the second entry from the right',
  );
  t.same(await chargedSubjects(hops), ['ip:198.51.100.1']);
});

/** The subjects that have a rate window: who has been charged. */
async function chargedSubjects(api: TestApp): Promise<string[]> {
  const rows = await api.database.sql`select subject from paginated_collections.rate_windows order by subject`;
  return rows.map((row) => row.subject as string);
}

t.test('over a real socket: forwarded headers count from a trusted peer only, for the limit and for links', async (t) => {
  const db = await testDatabase(t);
  await seedTable(db.sql, 'products', 5);
  await db.sql`update paginated_collections.rate_tiers set allowance = 2 where name = 'anonymous'`;
  const forwarded = { 'x-forwarded-for': '198.51.100.77', 'x-forwarded-host': 'public.example', 'x-forwarded-proto': 'https' };
  const other = await startServer(t, await freePort(), { DATABASE_URL: db.url, TRUST_PROXY: '10.9.9.9' });
  const statuses = [];
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${other.url}/v1/products?limit=1&count=none`, {
      headers: { ...forwarded, 'x-forwarded-for': `198.51.100.${i}` },
    });
    statuses.push(res.status);
    if (i === 0)
      t.equal(
        (await res.json())._links.self.href,
        `${other.url}/v1/products?limit=1&offset=0&count=none`,
        "links: the request's own origin",
      );
  }
  t.same(statuses, [200, 200, 429], 'a peer that is not the named proxy is counted by its socket address');

  const trusted = await startServer(t, await freePort(), { DATABASE_URL: db.url, TRUST_PROXY: 'loopback' });
  const res = await fetch(`${trusted.url}/v1/products?limit=1&count=none`, { headers: forwarded });
  t.equal(res.status, 200, 'another client than 127.0.0.1, which is over');
  t.equal(
    (await res.json())._links.self.href,
    'https://public.example/v1/products?limit=1&offset=0&count=none',
    'links: the forwarded origin',
  );
  const junk = await fetch(`${trusted.url}/v1/products?limit=1&count=none`, { headers: { 'x-forwarded-for': 'junk' } });
  t.equal(junk.status, 400);
  t.equal((await junk.json()).invalid_params[0].name, 'X-Forwarded-For');
  const rows = await db.sql`select subject, used from paginated_collections.rate_windows order by subject`;
  t.same(
    rows.map((row) => [row.subject, Number(row.used)]),
    [
      ['ip:127.0.0.1', 2],
      ['ip:198.51.100.77', 1],
    ],
  );
});

t.test('IPv6 clients are grouped by /64', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 2, windowSeconds: 60, concurrency: 4 });
  t.equal((await api.request('/v1', { address: '2001:db8:5:6::1' })).status, 200);
  t.equal((await api.request('/v1', { address: '2001:db8:5:6:ffff::2' })).status, 200);
  t.equal((await api.request('/v1', { address: '2001:db8:5:6:1234:5678:9abc:def0' })).status, 429, 'same /64');
  t.equal((await api.request('/v1', { address: '2001:db8:5:7::1' })).status, 200, 'another /64');
  t.equal((await api.request('/v1', { address: '::ffff:192.0.2.99' })).status, 200);
  t.equal((await api.request('/v1', { address: '192.0.2.99' })).status, 200, 'mapped IPv4 is the IPv4 address');
  t.equal((await api.request('/v1', { address: '192.0.2.99' })).status, 429);
});
