// Keys with scopes and claims (docs/reference/api.md, "Keys: scopes and claims"): POST /admin/keys issues one,
// GET /admin/keys/{id} shows it, PATCH changes its tier, collections and claims, each bad field a 400 naming it.
// The key's collections and claims come back with every decision of the key, read by rate_decide's one lookup, so
// a change made through one instance is what another decides with from its next request on, on the one-subject
// path and the batch path alike; on several limiter databases, and after start-up's copy, too. A subject whose
// tier does not exist is the outcome `unknown_tier`, charged nothing. Keys made under earlier releases read with
// no collections list and no claims after the migration, through a limiter whose statement was prepared before it.
import { createHash, randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { Sql } from 'postgres';
import t from 'tap';
import { openDatabase } from '../../db/client.ts';
import { runMigrations } from '../../db/migrate.ts';
import { apiKeys } from '../../db/schema.ts';
import { hashKey } from '../../lib/ratelimit/identity.ts';
import { keyStore, syncKeysAndTiers } from '../../lib/ratelimit/key-store.ts';
import { issueKey } from '../../lib/ratelimit/keys.ts';
import { type Decision, databaseLimiter, type KeyScope } from '../../lib/ratelimit/limiter.ts';
import { ADMIN_TOKEN, type TestApp, testApp } from '../helpers/app.ts';
import { emptyDatabase, scratchSession } from '../helpers/db.ts';
import { migrateAsPublicSchemaRelease, migrateAsServiceSchemaRelease } from '../helpers/earlier-release.ts';
import { limits } from '../helpers/limiter.ts';

function admin(api: TestApp, method: string, path: string, body?: unknown, token = ADMIN_TOKEN) {
  return api.request(path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** A decision for `key` (none: the address alone) on tier `ipTier` when no live key names the client. */
function input(key: string | undefined, ipSubject = 'ip:192.0.2.10', ipTier = 'anonymous') {
  return { keyHash: key === undefined ? undefined : hashKey(key), ipSubject, ipTier, cost: 1, clockOffset: 0 };
}

/** The parts of a decision this file is about. */
function scoped(decision: Decision) {
  return { outcome: decision.outcome, tier: decision.tier, keyId: decision.keyId, scope: decision.scope };
}

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

t.test('POST /admin/keys issues a key with a tier, collections and claims, shown once; GET shows it without the secret', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const claims = { tenant: 7, groups: ['a', 'b'], app_metadata: { tenant: 'x' }, constructor: 'kept', flag: true, none: null };
  const res = await admin(api, 'POST', '/admin/keys', { name: 'acme', tier: 'pro', collections: ['orders', 'products'], claims });
  t.equal(res.status, 201);
  const issued = await res.json();
  t.match(issued, { id: /^key_[A-Za-z0-9_-]{12}$/, key: /^pck_[A-Za-z0-9_-]{32}$/, createdAt: RFC3339 });
  t.same(Object.keys(issued), ['id', 'key', 'prefix', 'name', 'tier', 'collections', 'claims', 'createdAt']);
  t.same(
    { ...issued, id: 0, key: 0, createdAt: 0 },
    {
      id: 0,
      key: 0,
      prefix: issued.key.slice(0, 10),
      name: 'acme',
      tier: 'pro',
      collections: ['orders', 'products'],
      claims,
      createdAt: 0,
    },
  );

  const shown = await admin(api, 'GET', `/admin/keys/${issued.id}`);
  t.equal(shown.status, 200);
  const { key: _, ...view } = issued;
  t.same(await shown.json(), view, 'the key as issued, less its secret');
  const head = await admin(api, 'HEAD', `/admin/keys/${issued.id}`);
  t.equal(head.status, 200);
  t.equal(await head.text(), '');

  // Only the hash is kept, and the key authenticates on its tier.
  const [row] = await api.database.sql`select key_hash, collections, claims from paginated_collections.api_keys where id = ${issued.id}`;
  t.same(row!.key_hash, createHash('sha256').update(issued.key).digest());
  t.same([row!.collections, row!.claims], [['orders', 'products'], claims]);
  t.equal(limits(await api.request('/v1', { headers: { authorization: `Bearer ${issued.key}` } })).limit, 6000, 'on its tier');

  // Only a tier: no name, every collection, no claims; `collections: null` says the same.
  const plain = await (await admin(api, 'POST', '/admin/keys', { tier: 'free' })).json();
  t.match(plain, { name: null, tier: 'free', collections: null, claims: {} });
  const everything = await (await admin(api, 'POST', '/admin/keys', { tier: 'free', collections: null, claims: {} })).json();
  t.match(everything, { collections: null, claims: {} });
  t.same(await (await admin(api, 'POST', '/admin/keys', { tier: 'free', collections: [] })).json().then((k) => k.collections), []);

  // POST /v1/keys issues the same kind of key: no claims, every collection.
  const own = await (await api.request('/v1/keys', { method: 'POST' })).json();
  t.match(await (await admin(api, 'GET', `/admin/keys/${own.id}`)).json(), { tier: 'free', collections: null, claims: {} });
});

t.test('PATCH /admin/keys/{id} changes what it names and keeps the rest; a revoked key is shown with revokedAt', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const issued = await (await admin(api, 'POST', '/admin/keys', { tier: 'free', collections: ['orders'], claims: { tenant: 1 } })).json();
  const path = `/admin/keys/${issued.id}`;
  const { key: _, ...view } = issued;
  const steps: [Record<string, unknown>, Record<string, unknown>][] = [
    [{ claims: { tenant: 2, regions: ['eu', 'us'] } }, { claims: { tenant: 2, regions: ['eu', 'us'] } }],
    [{ collections: ['orders', 'events'] }, { collections: ['orders', 'events'] }],
    [{ tier: 'pro' }, { tier: 'pro' }],
    [{ collections: null }, { collections: null }],
    [{ claims: {} }, { claims: {} }],
    [
      { tier: 'free', collections: ['products'], claims: { tenant: 'x' } },
      { tier: 'free', collections: ['products'], claims: { tenant: 'x' } },
    ],
  ];
  let expected = view;
  for (const [change, changed] of steps) {
    expected = { ...expected, ...changed };
    const res = await admin(api, 'PATCH', path, change);
    t.equal(res.status, 200, JSON.stringify(change));
    t.same(await res.json(), expected, `${JSON.stringify(change)}: the key as changed`);
    t.same(await (await admin(api, 'GET', path)).json(), expected, 'and as shown');
  }

  t.equal((await admin(api, 'DELETE', path)).status, 204);
  const revoked = await (await admin(api, 'GET', path)).json();
  t.match(revoked, { ...expected, revokedAt: RFC3339 });
  t.equal((await admin(api, 'PATCH', path, { claims: {} })).status, 404, 'a revoked key is not changed');
  t.same(await (await admin(api, 'GET', path)).json(), revoked);
});

t.test('every bad field of a key body is a 400 naming it; nothing refused is written', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const issued = await (await admin(api, 'POST', '/admin/keys', { tier: 'free', collections: ['orders'], claims: { tenant: 1 } })).json();
  const tooMany = Array.from({ length: 1001 }, (_, i) => `c${i}`);
  const thousand = Array.from({ length: 1000 }, (_, i) => `c${i}`);
  const claimOf = (bytes: number) => ({ c: 'x'.repeat(bytes - 8) }); // {"c":"…"}: 8 bytes and the text
  /** Claims whose innermost array is `levels` below the claims object. */
  const nested = (levels: number) => ({ a: JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`) });
  // Both routes take the same collections and claims.
  const fields: [unknown, string[], RegExp?][] = [
    [{ collections: ['nope'] }, ['collections'], /names no collection: nope/],
    [{ collections: ['orders', 'nope', 'neither'] }, ['collections'], /names no collection: nope, neither/],
    [{ collections: thousand }, ['collections'], /names no collection: c0, c1, .* and 990 more/],
    [{ collections: tooMany }, ['collections'], /at most 1000/],
    [{ collections: ['orders', 'orders'] }, ['collections'], /orders is there twice/],
    [{ collections: 'orders' }, ['collections']],
    [{ collections: {} }, ['collections']],
    [{ collections: ['orders', 7] }, ['collections.1']],
    [{ claims: [] }, ['claims']],
    [{ claims: 'tenant' }, ['claims']],
    [{ claims: 7 }, ['claims']],
    [{ claims: null }, ['claims']],
    [{ claims: { '': 1 } }, ['claims'], /empty/],
    [{ claims: { tenant: 'a\u0000b' } }, ['claims'], /NUL/],
    [{ claims: { 'a\u0000': 1 } }, ['claims'], /NUL/],
    [{ claims: { tenant: ['\ud800'] } }, ['claims'], /surrogate/],
    [{ claims: { nested: { deeper: 'x\udc00' } } }, ['claims'], /surrogate/],
    [{ claims: claimOf(4097) }, ['claims'], /4096 bytes/],
    [{ claims: nested(32) }, ['claims'], /at most 32 levels deep/],
    [{ claims: { tenant: 1 }, burst: 1 }, ['burst']],
    [{ tier: 'platinum' }, ['tier'], /names no tier: platinum/],
    [{ tier: 'Pro!' }, ['tier']],
    [{ tier: 'platinum', collections: ['nope'] }, ['tier', 'collections']],
    [{ tier: 7, collections: 'x', claims: [] }, ['tier', 'collections', 'claims']],
  ];
  const cases: [string, string, unknown, string[], RegExp?][] = [];
  for (const [body, names, reason] of fields) {
    cases.push(['POST', '/admin/keys', { tier: 'free', ...(body as object) }, names, reason]);
    cases.push(['PATCH', `/admin/keys/${issued.id}`, body, names, reason]);
  }
  cases.push(
    ['POST', '/admin/keys', {}, ['tier']],
    ['POST', '/admin/keys', { collections: ['orders'] }, ['tier']],
    ['POST', '/admin/keys', { tier: 'free', name: '' }, ['name']],
    ['POST', '/admin/keys', { tier: 'free', name: 'a\u0007b' }, ['name']],
    ['POST', '/admin/keys', { tier: 'free', key: `pck_${'a'.repeat(32)}` }, ['key']],
    ['POST', '/admin/keys', { tier: 'free', id: 'key_mine' }, ['id']],
    ['POST', '/admin/keys', '{"tier": "free", "claims": {"n": 1e999}}', ['claims'], /out of range/],
    ['POST', '/admin/keys', '{"tier": "free", "__proto__": {"tier": "pro"}}', ['__proto__']],
    // Thousands of levels, well within the body's 64 KiB: refused by their depth, not by an overflowing stack.
    ['POST', '/admin/keys', `{"tier": "free", "claims": {"a": ${'['.repeat(30_000)}${']'.repeat(30_000)}}}`, ['claims'], /deep/],
    ['POST', '/admin/keys', `{"tier": "free", "claims": {"a": ${'{"b":'.repeat(10_000)}1${'}'.repeat(10_000)}}}`, ['claims'], /deep/],
    ['POST', '/admin/keys', 'not json', ['body']],
    ['POST', '/admin/keys', '[1]', ['body']],
    ['POST', '/admin/keys', '', ['body']],
    ['PATCH', `/admin/keys/${issued.id}`, {}, ['body'], /at least one of tier, collections and claims/],
    ['PATCH', `/admin/keys/${issued.id}`, { name: 'renamed' }, ['name']],
    ['PATCH', `/admin/keys/${issued.id}`, 'null', ['body']],
    ['PATCH', '/admin/keys/key_a%00b', { claims: {} }, ['id']],
    ['GET', '/admin/keys/key_a%00b', undefined, ['id']],
    ['GET', `/admin/keys/${'k'.repeat(65)}`, undefined, ['id']],
  );
  for (const [method, path, body, names, reason] of cases) {
    const res = await admin(api, method, path, body);
    const label = `${method} ${path.slice(0, 30)} ${JSON.stringify(body)?.slice(0, 80)}`;
    t.equal(res.status, 400, label);
    t.equal(res.headers.get('content-type'), 'application/problem+json');
    const problem = await res.json();
    t.equal(problem.code, 'invalid_parameter', label);
    t.same(problem.invalid_params.map((p: { name: string }) => p.name).sort(), [...names].sort(), `${label} names ${names}`);
    if (reason) t.match(problem.detail, reason, `${label}: ${problem.detail.slice(0, 120)}`);
  }

  // The limits themselves are taken: 4096 bytes of claims, and a body of a thousand names fits.
  const exact = await admin(api, 'POST', '/admin/keys', { tier: 'free', claims: claimOf(4096) });
  t.equal(exact.status, 201, '4096 bytes of claims are taken');
  t.same((await exact.json()).claims, claimOf(4096));
  const deep = await admin(api, 'POST', '/admin/keys', { tier: 'free', claims: nested(31) });
  t.equal(deep.status, 201, '31 levels of nesting are taken');
  t.same((await deep.json()).claims, nested(31));
  const names = await api.database.sql`select id from paginated_collections.api_keys order by id`;
  t.equal(names.length, 3, 'no refused body issued a key');
  const { key: _, ...view } = issued;
  t.same(await (await admin(api, 'GET', `/admin/keys/${issued.id}`)).json(), view, 'no refused body changed the key');
  const byName = await admin(api, 'PATCH', `/admin/keys/${issued.id}`, '{"claims": {"constructor": 1, "__proto__": 2, "toString": "x"}}');
  t.equal(byName.status, 200);
  t.same(Object.keys((await byName.json()).claims).sort(), ['__proto__', 'constructor', 'toString'], 'claims of any name are kept');
});

t.test('key routes: 404 for an unknown key, 405 with Allow, the admin token, a body limit of 64 KiB', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  for (const [method, path] of [
    ['GET', '/admin/keys/key_nope'],
    ['PATCH', '/admin/keys/key_nope'],
  ] as const) {
    const res = await admin(api, method, path, method === 'PATCH' ? { claims: {} } : undefined);
    t.equal(res.status, 404, `${method} ${path}`);
    t.equal((await res.json()).code, 'not_found');
  }
  const allowed: [string, string, string][] = [
    ['GET', '/admin/keys', 'POST'],
    ['PUT', '/admin/keys', 'POST'],
    ['DELETE', '/admin/keys', 'POST'],
    ['POST', '/admin/keys/key_nope', 'GET, HEAD, PATCH, DELETE'],
    ['PUT', '/admin/keys/key_nope', 'GET, HEAD, PATCH, DELETE'],
  ];
  for (const [method, path, allow] of allowed) {
    const res = await admin(api, method, path, method === 'PUT' ? { tier: 'free' } : undefined);
    t.equal(res.status, 405, `${method} ${path}`);
    t.equal(res.headers.get('allow'), allow);
    t.equal((await res.json()).code, 'method_not_allowed');
  }
  for (const [method, path] of [
    ['POST', '/admin/keys'],
    ['GET', '/admin/keys/key_nope'],
  ]) {
    t.equal((await api.request(path!, { method, body: method === 'POST' ? '{"tier":"free"}' : undefined })).status, 401);
    t.equal((await admin(api, method!, path!, method === 'POST' ? { tier: 'free' } : undefined, 'wrong')).status, 403);
  }
  const padded = (bytes: number) => `{"tier": "free"}${' '.repeat(bytes - 16)}`;
  t.equal((await admin(api, 'POST', '/admin/keys', padded(64 * 1024))).status, 201, '64 KiB are read');
  const over = await admin(api, 'POST', '/admin/keys', padded(64 * 1024 + 1));
  t.equal(over.status, 413);
  t.match(await over.json(), { code: 'payload_too_large', invalid_params: [{ name: 'body', reason: 'must be at most 65536 bytes' }] });
  t.equal((await admin(api, 'PUT', '/admin/tiers/team', `{"limit": 1}${' '.repeat(4096)}`)).status, 413, 'a tier body stays within 4 KiB');
});

t.test("a change through /admin is what another instance decides with from the key's next request on", async (t) => {
  const api = await testApp(t, { rateLimit: true });
  // Another instance: its own pool and its own limiter connection (as the service's, without array types).
  const other = openDatabase(api.database.url, { max: 2 });
  t.teardown(() => other.close());
  const limiter = databaseLimiter(other.limiter, 30);
  const issued = await (await admin(api, 'POST', '/admin/keys', { tier: 'free', collections: ['orders'], claims: { tenant: 1 } })).json();
  const id = issued.id as string;

  /** The key's decision alone in its statement (the one-subject path), and beside an address's (the batch path). */
  const both = async () => {
    const alone = await limiter.decide(input(issued.key));
    const [batched, address] = await Promise.all([limiter.decide(input(issued.key)), limiter.decide(input(undefined, 'ip:192.0.2.99'))]);
    t.same(scoped(address), { outcome: 'ok', tier: 'anonymous', keyId: undefined, scope: undefined }, 'no key, no scope');
    t.same(scoped(batched), scoped(alone), 'both paths return the same scope');
    return scoped(alone);
  };

  t.same(await both(), { outcome: 'ok', tier: 'free', keyId: id, scope: { collections: ['orders'], claims: { tenant: 1 } } });
  await admin(api, 'PATCH', `/admin/keys/${id}`, { collections: null, claims: { tenant: 2, groups: ['x', 'y'], meta: { org: 'o' } } });
  t.same(await both(), {
    outcome: 'ok',
    tier: 'free',
    keyId: id,
    scope: { collections: undefined, claims: { tenant: 2, groups: ['x', 'y'], meta: { org: 'o' } } },
  });
  await admin(api, 'PATCH', `/admin/keys/${id}`, { tier: 'pro', collections: [] });
  t.same(await both(), {
    outcome: 'ok',
    tier: 'pro',
    keyId: id,
    scope: { collections: [], claims: { tenant: 2, groups: ['x', 'y'], meta: { org: 'o' } } },
  });

  // A declined decision of the key still carries its scope; a revoked key none.
  await api.database.sql`update paginated_collections.rate_tiers set allowance = 1 where name = 'pro'`;
  t.same(scoped(await limiter.decide(input(issued.key))), {
    outcome: 'rate',
    tier: 'pro',
    keyId: id,
    scope: { collections: [], claims: { tenant: 2, groups: ['x', 'y'], meta: { org: 'o' } } },
  });
  await admin(api, 'DELETE', `/admin/keys/${id}`);
  t.same(scoped(await limiter.decide(input(issued.key))), {
    outcome: 'invalid_key',
    tier: 'anonymous',
    keyId: undefined,
    scope: undefined,
  });
});

t.test('a tier that does not exist is the outcome unknown_tier: nothing charged, no lease, no row', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const limiter = databaseLimiter(api.database.limiter, 30);
  const subject = 'tok:https://issuer.test|user-1';
  const refused = {
    outcome: 'unknown_tier',
    subject,
    tier: 'platinum',
    keyId: undefined,
    scope: undefined,
    allowance: 0,
    windowSeconds: 0,
    remaining: 0,
    reset: 0,
    retryAfter: 0,
    lease: undefined,
    charged: 0,
    concurrency: 0,
  };
  const unknown = { ...input(undefined, subject, 'platinum'), cost: 5 };
  const { now, ...alone } = await limiter.decide(unknown);
  t.same(alone, refused, 'alone in its statement (the one-subject path)');
  t.ok(Math.abs(now - Date.now() / 1000) < 60, 'now is the database clock');

  // Beside other subjects in one statement (the batch path): they are decided as ever.
  const [batched, address, again] = await Promise.all([
    limiter.decide(unknown),
    limiter.decide(input(undefined, 'ip:192.0.2.5')),
    limiter.decide({ ...input(undefined, 'tok:https://issuer.test|user-2', 'nosuch'), cost: 1 }),
  ]);
  const { now: _, ...rest } = batched;
  t.same(rest, refused, 'in a batch');
  t.match(address, { outcome: 'ok', charged: 1, tier: 'anonymous' });
  t.ok(address.lease, 'the address took its lease');
  t.match(again, { outcome: 'unknown_tier', tier: 'nosuch', charged: 0 });
  const rows = await api.database.sql`select subject from paginated_collections.rate_windows order by subject`;
  t.same(
    rows.map((row) => row.subject),
    ['ip:192.0.2.5'],
    'no row for a subject of an unknown tier',
  );

  // A live key decides on its own tier, whatever tier the address would have.
  const key = await (await admin(api, 'POST', '/admin/keys', { tier: 'free' })).json();
  t.match(await limiter.decide(input(key.key, subject, 'platinum')), { outcome: 'ok', tier: 'free', keyId: key.id });
  // Once the tier exists, the same subject is decided on it.
  await admin(api, 'PUT', '/admin/tiers/platinum', { limit: 10, windowSeconds: 60, concurrency: 2 });
  t.match(await limiter.decide(unknown), { outcome: 'ok', tier: 'platinum', charged: 5, remaining: 5 });
});

t.test('keys are copied to every limiter database with their collections and claims, by a change and by start-up', async (t) => {
  const first = await emptyDatabase(t);
  const second = await emptyDatabase(t);
  await runMigrations(first.url);
  await runMigrations(second.url);
  const database = openDatabase(first.url, { limiters: [first.url, second.url] });
  t.teardown(() => database.close());
  const store = keyStore(database.limiters);
  const onSecond = databaseLimiter(database.limiters[1]!.connection, 0);

  const issued = await issueKey(store, { name: 'copied', tier: 'free', collections: ['orders'], claims: { tenant: [1, 2] } });
  t.same(scoped(await onSecond.decide(input(issued.key))).scope, { collections: ['orders'], claims: { tenant: [1, 2] } }, 'issued');
  await store.change(
    (db) =>
      db
        .update(apiKeys)
        .set({ collections: null, claims: { tenant: 3 } })
        .where(eq(apiKeys.id, issued.id)),
    () => ({ keys: [issued.id] }),
  );
  t.same(scoped(await onSecond.decide(input(issued.key))).scope, { collections: undefined, claims: { tenant: 3 } }, 'changed');

  // A change made on the first alone (one that failed in its very commit elsewhere) is put right at start-up.
  await first.sql`update paginated_collections.api_keys set collections = '{events}', claims = '{"tenant": 4}' where id = ${issued.id}`;
  t.same(await syncKeysAndTiers(database.limiters), [database.limiters[1]!.identity], 'the second database differed');
  t.same(scoped(await onSecond.decide(input(issued.key))).scope, { collections: ['events'], claims: { tenant: 4 } }, 'synced');
  t.same(await syncKeysAndTiers(database.limiters), [], 'and then no more');
});

/** Inserts a key as an earlier release issued it, in `schema`'s api_keys; returns the key and its id. */
async function earlierKey(sql: Sql, schema: string): Promise<{ key: string; id: string }> {
  const key = `pck_${randomBytes(24).toString('base64url')}`;
  const id = `key_${randomBytes(9).toString('base64url')}`;
  await sql.unsafe(`insert into ${schema}.api_keys (id, key_hash, prefix, name, tier) values ($1, $2, $3, 'kept', 'free')`, [
    id,
    createHash('sha256').update(key).digest(),
    key.slice(0, 10),
  ]);
  return { key, id };
}

t.test('keys of earlier releases read every collection, with no claims, after the migration', async (t) => {
  for (const [release, migrateEarlier, schema] of [
    ['the release before scopes', migrateAsServiceSchemaRelease, 'paginated_collections'],
    ['the release before the service schema', migrateAsPublicSchemaRelease, 'public'],
  ] as const) {
    const { url, sql } = await emptyDatabase(t);
    await migrateEarlier(t, sql);
    const { key, id } = await earlierKey(sql, schema);
    // A running instance of the earlier release: its limiter's statement prepared on its one connection, before the
    // new release's functions step replaces rate_decide (its columns change) under it.
    const running = schema === 'paginated_collections' ? databaseLimiter(scratchSession(t, url), 0) : undefined;
    if (running) t.match(await running.decide(input(key)), { outcome: 'ok', keyId: id });

    await runMigrations(url);
    const [row] = await sql`select collections, claims from paginated_collections.api_keys where id = ${id}`;
    t.same(row, { collections: null, claims: {} }, `${release}: the key's row`);
    const database = openDatabase(url, { max: 1 });
    t.teardown(() => database.close());
    const decision = await databaseLimiter(database.limiter, 0).decide(input(key));
    const everyCollection: KeyScope = { collections: undefined, claims: {} };
    t.same(scoped(decision), { outcome: 'ok', tier: 'free', keyId: id, scope: everyCollection }, `${release}: decided`);
    if (running) {
      t.same(
        scoped(await running.decide(input(key))),
        scoped(decision),
        `${release}: the statement prepared before the migration is prepared again`,
      );
    }
  }
});
