// POST /v1/keys: a key shown once and stored as a hash; registrations limited per address per hour.
import { createHash } from 'node:crypto';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { limits, setTier } from '../helpers/limiter.ts';

t.test('a key is issued once, stored only as a hash, and names its client from then on', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const res = await api.request('/v1/keys', { method: 'POST', body: JSON.stringify({ name: 'ci' }) });
  t.equal(res.status, 201);
  const body = await res.json();
  t.match(body, { id: /^key_[A-Za-z0-9_-]{12}$/, key: /^pck_[A-Za-z0-9_-]{32}$/, tier: 'free', name: 'ci' });
  const rows = await api.database.sql`select * from paginated_collections.api_keys`;
  t.equal(rows.length, 1);
  t.notMatch(JSON.stringify(rows), body.key.slice(4), 'the key itself is not stored');
  t.same(Buffer.from(rows[0]!.key_hash), createHash('sha256').update(body.key).digest());
  t.equal(rows[0]!.prefix, body.key.slice(0, 10));

  const use = await api.request('/v1', { headers: { authorization: `Bearer ${body.key}` } });
  t.equal(use.status, 200);
  t.equal(limits(use).limit, 600);
  t.equal(use.headers.get('ratelimit-policy'), '"free";q=600;w=60');
  const second = await (await api.request('/v1/keys', { method: 'POST' })).json();
  t.not(second.key, body.key);
  t.equal(second.name, undefined);
});

t.test('registrations: 5 per address per hour, with the registration tier in the headers', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  for (let i = 1; i <= 5; i++) {
    const res = await api.request('/v1/keys', { method: 'POST', address: '198.51.100.7' });
    t.equal(res.status, 201);
    t.equal(limits(res).limit, 5);
    t.equal(limits(res).remaining, 5 - i);
    t.equal(res.headers.get('ratelimit-policy'), '"registration";q=5;w=3600');
  }
  const over = await api.request('/v1/keys', { method: 'POST', address: '198.51.100.7' });
  t.equal(over.status, 429);
  t.equal((await over.json()).code, 'Request_limit_exceeded');
  const { retryAfter, reset } = limits(over);
  t.ok(retryAfter! > 3500 && retryAfter! <= 3661, `retry after about an hour: ${retryAfter}`);
  t.ok(reset > 0);
  t.equal((await api.request('/v1/keys', { method: 'POST', address: '198.51.100.8' })).status, 201, 'another address');
  const anon = await api.request('/v1', { address: '198.51.100.7' });
  t.equal(limits(anon).remaining, 59, 'registrations do not draw on the anonymous allowance');
  const [row] = await api.database.sql`select count(*)::int as n from paginated_collections.api_keys`;
  t.equal(row!.n, 6, 'the declined registration stored nothing');

  api.clock = retryAfter!;
  t.equal((await api.request('/v1/keys', { method: 'POST', address: '198.51.100.7' })).status, 201, 'after Retry-After');
});

t.test('a bad body is a 400 that is charged; other methods are 405', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const cases = ['not json', '[]', '{"name": 5}', '{"name": ""}', '{"tier": "pro"}', JSON.stringify({ name: 'x'.repeat(201) })];
  let remaining = 5;
  for (const body of cases.slice(0, 5)) {
    const res = await api.request('/v1/keys', { method: 'POST', body, address: '198.51.100.9' });
    t.equal(res.status, 400, body);
    t.equal((await res.json()).code, 'invalid_parameter');
    t.equal(limits(res).remaining, --remaining, 'charged');
  }
  t.equal((await api.request('/v1/keys', { method: 'POST', body: cases[5], address: '198.51.100.9' })).status, 429);
  const get = await api.request('/v1/keys');
  t.equal(get.status, 405);
  t.equal(get.headers.get('allow'), 'POST');
  t.equal(limits(get).limit, 60, 'GET /v1/keys is an ordinary anonymous request');
});

t.test('a body with an inherited or unknown field name, or a control character in the name, is a 400 naming it', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'registration', { allowance: 100, windowSeconds: 3600, concurrency: 4 });
  const cases: [string, string[]][] = [
    ['{"name": "x", "toString": 1}', ['toString']],
    ['{"__proto__": {"name": "x"}}', ['__proto__']],
    ['{"constructor": "x"}', ['constructor']],
    ['{"name": "a\\u0000b"}', ['name']],
    ['{"name": "line\\nbreak"}', ['name']],
    ['{"name": "x", "tier": "pro", "valueOf": 1}', ['tier', 'valueOf']],
    ['null', ['body']],
    ['"name"', ['body']],
  ];
  for (const [body, names] of cases) {
    const res = await api.request('/v1/keys', { method: 'POST', body });
    t.equal(res.status, 400, body);
    const problem = await res.json();
    t.equal(problem.code, 'invalid_parameter');
    t.same(problem.invalid_params.map((p: { name: string }) => p.name).sort(), [...names].sort(), `${body} names ${names}`);
  }
  const [keys] = await api.database.sql`select count(*)::int as n from paginated_collections.api_keys`;
  t.equal(keys!.n, 0, 'no key was issued');
  t.equal((await api.request('/v1/keys', { method: 'POST', body: '  ' })).status, 201, 'an empty body is no name');
});
