// The operator API: token checks, tiers (list, create, change, validate), keys (move, revoke).
import t from 'tap';
import { ADMIN_TOKEN, type TestApp, testApp } from '../helpers/app.ts';
import { limits } from '../helpers/limiter.ts';

function admin(api: TestApp, method: string, path: string, body?: unknown, token = ADMIN_TOKEN) {
  return api.request(path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
}

t.test('without ADMIN_TOKEN the operator API does not exist', async (t) => {
  const api = await testApp(t, { env: { ADMIN_TOKEN: '' }, rateLimit: true });
  const res = await admin(api, 'GET', '/admin/tiers');
  t.equal(res.status, 404);
  t.equal((await res.json()).code, 'not_found');
});

t.test('no token is 401 unauthorized, a wrong one 403 forbidden, on every admin path', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  for (const [method, path] of [
    ['GET', '/admin/tiers'],
    ['PUT', '/admin/tiers/x'],
    ['DELETE', '/admin/keys/k'],
    ['GET', '/admin/nope'],
  ]) {
    const none = await api.request(path!, { method });
    t.equal(none.status, 401, `${method} ${path}`);
    t.equal((await none.json()).code, 'unauthorized');
    for (const token of ['wrong', ADMIN_TOKEN.slice(0, -1), `${ADMIN_TOKEN}x`]) {
      const wrong = await admin(api, method!, path!, undefined, token);
      t.equal(wrong.status, 403, `${method} ${path} with a wrong token`);
      t.equal((await wrong.json()).code, 'forbidden');
    }
    const basic = await api.request(path!, { method, headers: { authorization: `Basic ${ADMIN_TOKEN}` } });
    t.equal(basic.status, 403);
  }
  t.equal((await admin(api, 'GET', '/admin/nope')).status, 404);
  t.equal((await admin(api, 'POST', '/admin/tiers')).status, 405);
  t.equal(limits(await admin(api, 'GET', '/admin/tiers')).limit, 0, 'admin calls are not rate limited');
});

t.test('tiers: listed, created (201), changed (200), validated (400 naming the field)', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const list = await (await admin(api, 'GET', '/admin/tiers')).json();
  t.same(list.tiers, [
    { name: 'registration', limit: 5, windowSeconds: 3600, concurrency: 2 },
    { name: 'anonymous', limit: 60, windowSeconds: 60, concurrency: 4 },
    { name: 'free', limit: 600, windowSeconds: 60, concurrency: 8 },
    { name: 'pro', limit: 6000, windowSeconds: 60, concurrency: 32 },
  ]);
  const tier = { limit: 100, windowSeconds: 10, concurrency: 2 };
  const created = await admin(api, 'PUT', '/admin/tiers/team', tier);
  t.equal(created.status, 201);
  t.same(await created.json(), { name: 'team', ...tier });
  const changed = await admin(api, 'PUT', '/admin/tiers/team', { ...tier, limit: 50 });
  t.equal(changed.status, 200);
  t.same(await changed.json(), { name: 'team', ...tier, limit: 50 });

  const bad: [unknown, string][] = [
    ['not json', 'body'],
    [[1], 'body'],
    [{ ...tier, limit: 0 }, 'limit'],
    [{ ...tier, limit: 1.5 }, 'limit'],
    [{ ...tier, windowSeconds: '10' }, 'windowSeconds'],
    [{ limit: 1, windowSeconds: 1 }, 'concurrency'],
    [{ ...tier, burst: 3 }, 'burst'],
  ];
  for (const [body, field] of bad) {
    const res = await admin(api, 'PUT', '/admin/tiers/team', body);
    t.equal(res.status, 400, JSON.stringify(body));
    const problem = await res.json();
    t.equal(problem.code, 'invalid_parameter');
    t.equal(problem.invalid_params[0].name, field);
  }
  const badName = await admin(api, 'PUT', '/admin/tiers/Bad%20Name', tier);
  t.equal(badName.status, 400);
  t.equal((await badName.json()).invalid_params[0].name, 'name');
});

t.test('a tier change applies from the next request on', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  t.equal(limits(await api.request('/v1')).limit, 60);
  await admin(api, 'PUT', '/admin/tiers/anonymous', { limit: 2, windowSeconds: 60, concurrency: 4 });
  const res = await api.request('/v1');
  t.equal(limits(res).limit, 2);
  t.equal(limits(res).remaining, 0, 'what was served before still counts');
  t.equal((await api.request('/v1')).status, 429);
});

t.test('keys: moved to another tier (200), unknown key 404, unknown tier 400; revoked (204, then 404)', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const issued = await (await api.request('/v1/keys', { method: 'POST' })).json();
  const bearer = { headers: { authorization: `Bearer ${issued.key}` } };
  t.equal(limits(await api.request('/v1', bearer)).limit, 600);

  const moved = await admin(api, 'PATCH', `/admin/keys/${issued.id}`, { tier: 'pro' });
  t.equal(moved.status, 200);
  t.match(await moved.json(), { id: issued.id, tier: 'pro' });
  const after = await api.request('/v1', bearer);
  t.equal(limits(after).limit, 6000, 'the next request counts on the new tier');
  t.equal(limits(after).remaining, 5998, 'with the units already served');

  t.equal((await admin(api, 'PATCH', '/admin/keys/key_nope', { tier: 'pro' })).status, 404);
  const unknownTier = await admin(api, 'PATCH', `/admin/keys/${issued.id}`, { tier: 'platinum' });
  t.equal(unknownTier.status, 400);
  t.equal((await unknownTier.json()).invalid_params[0].name, 'tier');
  t.equal((await admin(api, 'PATCH', `/admin/keys/${issued.id}`, { tier: 7 })).status, 400);
  t.equal((await admin(api, 'PATCH', `/admin/keys/${issued.id}`, 'nope')).status, 400);

  t.equal((await admin(api, 'DELETE', `/admin/keys/${issued.id}`)).status, 204);
  t.equal((await api.request('/v1', bearer)).status, 401);
  t.equal((await admin(api, 'DELETE', `/admin/keys/${issued.id}`)).status, 404, 'already revoked');
  t.equal((await admin(api, 'DELETE', '/admin/keys/key_nope')).status, 404);
  t.equal((await admin(api, 'PATCH', `/admin/keys/${issued.id}`, { tier: 'free' })).status, 404, 'a revoked key cannot be moved');
});

t.test('odd input is a 400 naming the field: NUL bytes, inherited field names, several unknown fields', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const issued = await (await api.request('/v1/keys', { method: 'POST' })).json();
  const tier = { limit: 100, windowSeconds: 10, concurrency: 2 };
  const cases: [string, string, unknown, string[]][] = [
    ['PATCH', '/admin/keys/key_a%00b', { tier: 'pro' }, ['id']],
    ['DELETE', '/admin/keys/key_a%00b', undefined, ['id']],
    ['DELETE', `/admin/keys/${'k'.repeat(65)}`, undefined, ['id']],
    ['PATCH', `/admin/keys/${issued.id}`, { tier: 'p\u0000ro' }, ['tier']],
    ['PATCH', `/admin/keys/${issued.id}`, '{"tier": "pro", "__proto__": {"tier": "pro"}}', ['__proto__']],
    ['PATCH', `/admin/keys/${issued.id}`, {}, ['body']],
    ['PUT', '/admin/tiers/t%00x', tier, ['name']],
    ['PUT', '/admin/tiers/team', { ...tier, toString: 1 }, ['toString']],
    ['PUT', '/admin/tiers/team', { ...tier, constructor: 1 }, ['constructor']],
    ['PUT', '/admin/tiers/team', { ...tier, hasOwnProperty: 1 }, ['hasOwnProperty']],
    ['PUT', '/admin/tiers/team', `{"limit": 100, "windowSeconds": 10, "concurrency": 2, "__proto__": {"x": 1}}`, ['__proto__']],
    ['PUT', '/admin/tiers/team', { ...tier, burst: 1, valueOf: 2 }, ['burst', 'valueOf']],
    ['PUT', '/admin/tiers/team', { limit: 'many', concurrency: 0 }, ['limit', 'windowSeconds', 'concurrency']],
    ['PUT', '/admin/tiers/team', 'null', ['body']],
    ['PUT', '/admin/tiers/team', '', ['body']],
  ];
  for (const [method, path, body, names] of cases) {
    const res = await admin(api, method, path, body);
    const label = `${method} ${path} ${JSON.stringify(body)}`;
    t.equal(res.status, 400, label);
    t.equal(res.headers.get('content-type'), 'application/problem+json');
    const problem = await res.json();
    t.equal(problem.code, 'invalid_parameter');
    t.same(problem.invalid_params.map((p: { name: string }) => p.name).sort(), [...names].sort(), `${label} names ${names}`);
  }
  const [tiers] = await api.database.sql`select count(*)::int as n from paginated_collections.rate_tiers where name = 'team'`;
  t.equal(tiers!.n, 0, 'no refused body created a tier');
  const [key] = await api.database.sql`select tier from paginated_collections.api_keys where id = ${issued.id}`;
  t.equal(key!.tier, 'free', 'no refused body moved the key');
});

t.test('a key printed by the operator API has createdAt in RFC 3339 UTC with six fractional digits', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const issued = await (await api.request('/v1/keys', { method: 'POST', body: '{"name": "ci"}' })).json();
  await api.database.sql`update paginated_collections.api_keys set created_at = '2026-11-21 10:00:00.1234+02' where id = ${issued.id}`;
  const moved = await (await admin(api, 'PATCH', `/admin/keys/${issued.id}`, { tier: 'pro' })).json();
  t.same(moved, {
    id: issued.id,
    prefix: issued.key.slice(0, 10),
    name: 'ci',
    tier: 'pro',
    collections: null,
    claims: {},
    createdAt: '2026-11-21T08:00:00.123400Z',
  });
});
