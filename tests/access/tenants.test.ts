// Row rules across tenants (docs/reference/api.md, "Access"): every variant walked to its end by each tenant's key
// and token is exactly `SELECT … WHERE tenant_id = $1` in order, with sizes and exact counts; nothing of another
// tenant appears in any item, size, count or link, for any filter, sort and page size (a property test); a cursor
// and an ETag replayed by another tenant are refused and never matched; every refusal says why, challenges as
// RFC 6750 says, and costs 1 unit.
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import t from 'tap';
import { createClient } from '../../client/index.ts';
import { ADMIN_TOKEN, pathOf, type TestApp, testApp } from '../helpers/app.ts';
import { makeScratch, registryAhead } from '../helpers/collections.ts';
import { followNext } from '../helpers/walk.ts';

const JWT_SECRET = 'a-secret-of-the-identity-provider-for-tests';

const DDL = `
  create table tenants (id int primary key, name text not null);
  create table orders (
    id serial primary key,
    tenant_id int not null references tenants,
    created_at timestamptz not null,
    status text not null,
    total numeric(10, 2) not null,
    password_hash text
  );
  create index on orders (tenant_id, id);
  create index on orders (tenant_id, created_at, id);
  create index on orders (tenant_id, status, id);
  -- An ordinary view (not security_invoker) over every tenant's rows: the rule filters it all the same.
  create view order_totals as select id, tenant_id, total from orders;`;

const FILE = `
collections:
  - relation: scratch.orders
    columns: [id, tenant_id, created_at, status, total]
    variants: [offset, page, cursor, time]
    defaultVariant: cursor
    timeColumn: created_at
    filters: { status: [eq, in], total: [gt, lte], tenant_id: [eq] }
    sort: [created_at]
    pageSize: { default: 7, max: 50 }
    # A sort no index serves costs this much: so does a read over several tenants (an array claim).
    cost: { unindexedSort: 500 }
    access:
      rows: { tenant_id: tenant }
  - relation: scratch.order_totals
    key: [id]
    unindexedSorts: true
    access:
      rows: { tenant_id: org.id }
  - relation: scratch.tenants
    name: directory
  - relation: scratch.tenants
    name: staff
    access: { anonymous: false }
`;

const ROWS = { 1: 41, 2: 17, 3: 3 } as const;
const STATUSES = ['new', 'paid', 'void'];

async function seed(api: TestApp): Promise<void> {
  await makeScratch(api.database.sql, DDL);
  await api.database.sql.unsafe(`insert into scratch.tenants values (1, 'one'), (2, 'two'), (3, 'three'), (4, 'none')`);
  // Interleaved tenants, some created at the same instant: the key breaks the ties.
  let n = 0;
  for (const [tenant, count] of Object.entries(ROWS)) {
    for (let i = 0; i < count; i++, n++) {
      await api.database.sql`insert into scratch.orders (tenant_id, created_at, status, total, password_hash)
        values (${Number(tenant)}, ${new Date(Date.UTC(2026, 0, 1, 0, (n * 7) % 50)).toISOString()}, ${STATUSES[n % 3]!}, ${((n * 13) % 100) + 0.5}, 'x')`;
    }
  }
  await api.database.sql`analyze scratch.orders`;
}

/** A key from the operator API with `claims` (and `collections`, when given). */
async function keyFor(api: TestApp, claims: Record<string, unknown>, collections?: string[]): Promise<string> {
  const res = await api.request('/admin/keys', {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tier: 'pro', claims, ...(collections ? { collections } : {}) }),
  });
  if (res.status !== 201) throw new Error(`POST /admin/keys: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { key: string }).key;
}

/** An HS256 JWT signed with the test's JWT_SECRET. */
function tokenFor(payload: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub: 'user', exp: Math.floor(Date.now() / 1000) + 3600, ...payload })}`;
  return `${body}.${createHmac('sha256', JWT_SECRET).update(body).digest('base64url')}`;
}

const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });

async function tenantApp(t: Parameters<typeof testApp>[0]): Promise<TestApp> {
  const registry = await registryAhead(t, DDL, FILE);
  const api = await testApp(t, { registry, rateLimit: true, env: { JWT_SECRET } });
  await seed(api);
  return api;
}

/** What a tenant's walk must equal: its rows in the order asked for. */
async function expected(api: TestApp, tenant: number, order = 'id', where = 'true'): Promise<number[]> {
  const rows = await api.database.sql.unsafe(`select id from scratch.orders where tenant_id = $1 and ${where} order by ${order}`, [tenant]);
  return rows.map((row) => Number(row.id));
}

const ids = (chunks: any[], name = 'orders') => chunks.flatMap((chunk) => chunk[name].map((item: { id: number }) => item.id));

t.test('each tenant walks exactly its own rows in every variant, with its own sizes and counts', async (t) => {
  const api = await tenantApp(t);
  for (const tenant of [1, 2, 3] as const) {
    for (const credential of [await keyFor(api, { tenant }), tokenFor({ tenant, sub: `user-${tenant}` })]) {
      const get = (path: string) => api.json(path, { headers: bearer(credential) });
      const what = `tenant ${tenant} (${credential.startsWith('pck_') ? 'key' : 'token'})`;
      const byId = await expected(api, tenant);
      const byTime = await expected(api, tenant, 'created_at, id');
      t.same(ids(await followNext('/v1/orders?page-size=5', get)), byId, `${what}: cursor`);
      t.same(ids(await followNext('/v1/orders?sort=created_at&page-size=4', get)), byTime, `${what}: cursor by created_at`);
      t.same(ids(await followNext('/v1/orders?offset=0&limit=6&count=exact', get)), byId, `${what}: offset`);
      t.same(ids(await followNext('/v1/orders?page=0&page-size=6&count=exact', get)), byId, `${what}: page`);
      t.same(ids(await followNext('/v1/orders?after=2000-01-01T00:00:00Z&page-size=5', get)), byTime, `${what}: time, oldest first`);
      const newest = await followNext('/v1/orders?before=2100-01-01T00:00:00Z&page-size=5', get);
      t.same(ids(newest), [...byTime].reverse(), `${what}: time, newest first`);

      const offset = await get('/v1/orders?offset=0&limit=6&count=exact');
      t.equal(offset.body.size, ROWS[tenant], `${what}: the size is its own`);
      t.equal(offset.body.count, 'exact');
      const page = await get('/v1/orders?page=0&page-size=6&count=exact');
      t.equal(page.body.totalPages, Math.ceil(ROWS[tenant] / 6), `${what}: totalPages are its own`);
      const last = await get(pathOf(offset.body._links.last.href));
      t.same(
        last.body.orders.map((item: { id: number }) => item.id),
        byId.slice(byId.length - (byId.length % 6 || 6)),
        `${what}: last is its own last chunk`,
      );
      const sinceId = await followNext(`/v1/orders?since_id=${byId[2]}&page-size=5`, get);
      t.same(ids(sinceId), byId.slice(3), `${what}: since_id continues within its rows`);
      if (credential.startsWith('pck_')) {
        const view = await get('/v1/order_totals');
        t.equal(view.status, 403, `${what}: the view's rule reads org.id, which this key lacks`);
      } else {
        const view = await followNext('/v1/order_totals?page-size=9', (path) =>
          api.json(path, { headers: bearer(tokenFor({ org: { id: tenant }, sub: `org-${tenant}` })) }),
        );
        t.same(ids(view, 'order_totals'), byId, `${what}: the view over every tenant serves its rows only (nested claim org.id)`);
      }
    }
  }
});

t.test('a client narrows its rows with its own filters, never widens them; an array claim reads each of its values', async (t) => {
  const api = await tenantApp(t);
  const one = await keyFor(api, { tenant: 1 });
  const get = (path: string, key = one) => api.json(path, { headers: bearer(key) });
  const other = await get('/v1/orders?tenant_id=2&count=exact&offset=0');
  t.equal(other.status, 200);
  t.same(other.body.orders, [], "tenant 1 filtering on tenant 2's rows gets none");
  t.equal(other.body.size, 0);
  const paid = await followNext('/v1/orders?status=paid&page-size=4', (path) => get(path));
  t.same(ids(paid), await expected(api, 1, 'id', "status = 'paid'"));

  const both = await keyFor(api, { tenant: [1, 3] });
  const walked = ids(await followNext('/v1/orders?page-size=10', (path) => get(path, both)));
  t.same(
    walked,
    (await expected(api, 1)).concat(await expected(api, 3)).sort((a, b) => a - b),
    'an array claim: the rows of every value',
  );
  // Fresh keys, so that the allowance each has spent is this one chunk's.
  const single = await get('/v1/orders?page-size=10', await keyFor(api, { tenant: 1 }));
  const scattered = await get('/v1/orders?page-size=10', await keyFor(api, { tenant: [1, 3] }));
  const cost = (res: { headers: Headers }) =>
    Number(res.headers.get('x-ratelimit-limit')) - Number(res.headers.get('x-ratelimit-remaining'));
  t.ok(cost(single) < 500, `one tenant's chunk, along its index: ${cost(single)} units`);
  t.ok(
    cost(scattered) >= 500,
    `several tenants' chunk, which no index serves in order, priced as an unindexed sort: ${cost(scattered)} units`,
  );
});

t.test('the index lists what the client may read; each refusal says why, challenges as RFC 6750 says and costs 1 unit', async (t) => {
  const api = await tenantApp(t);
  const listed = async (headers: Record<string, string> = {}) =>
    Object.keys((await api.json('/v1', { headers })).body._links)
      .filter((rel) => rel !== 'self')
      .sort();
  t.same(await listed(), ['directory'], 'anonymous: the collections open to everyone');
  const scoped = await keyFor(api, { tenant: 2 }, ['orders']);
  t.same(await listed(bearer(scoped)), ['orders'], 'a key scoped to orders');
  t.same(await listed(bearer(await keyFor(api, { tenant: 2 }))), ['directory', 'orders', 'staff'], 'no org.id claim: not the view');
  t.same(await listed(bearer(tokenFor({ tenant: 1, org: { id: 1 } }))), ['directory', 'order_totals', 'orders', 'staff']);

  const spent = (res: Response) => Number(res.headers.get('x-ratelimit-limit')) - Number(res.headers.get('x-ratelimit-remaining'));
  const refusals: [string, Record<string, string>, number, string, string][] = [
    ['/v1/orders?page-size=50', {}, 401, 'unauthorized', 'Bearer realm="api"'],
    ['/v1/staff', {}, 401, 'unauthorized', 'Bearer realm="api"'],
    [
      '/v1/directory?page-size=50',
      bearer(await keyFor(api, { tenant: 2 }, ['orders'])),
      403,
      'insufficient_scope',
      'Bearer realm="api", error="insufficient_scope"',
    ],
    ['/v1/orders?page-size=50', bearer(await keyFor(api, { team: 2 })), 403, 'insufficient_scope', 'error="insufficient_scope"'],
    ['/v1/orders?page-size=50', bearer(await keyFor(api, { tenant: 'two' })), 403, 'insufficient_scope', 'error="insufficient_scope"'],
    ['/v1/orders?page-size=50', bearer(await keyFor(api, { tenant: true })), 403, 'insufficient_scope', 'error="insufficient_scope"'],
    ['/v1/orders?page-size=50', bearer(tokenFor({ tenant: 1, exp: 1 })), 401, 'invalid_token', 'Bearer realm="api", error="invalid_token"'],
    ['/v1/orders?page-size=50', bearer(`${tokenFor({ tenant: 1 })}x`), 401, 'invalid_token', 'error="invalid_token"'],
    ['/v1/orders?page-size=50', bearer(tokenFor({ tenant: 1, tier: 'platinum' })), 401, 'invalid_token', 'error="invalid_token"'],
  ];
  let address = 10;
  for (const [path, headers, status, code, challenge] of refusals) {
    // An address of its own each: an invalid token is counted against it.
    const res = await api.request(path, { headers, address: `198.51.100.${address++}` });
    const body = (await res.json()) as { code: string; detail: string };
    const what = `${path} ${JSON.stringify(headers).slice(0, 40)}: ${body.detail}`;
    t.equal(res.status, status, what);
    t.equal(body.code, code, what);
    t.match(res.headers.get('www-authenticate'), challenge, `${what}: its challenge`);
    t.equal(spent(res), 1, `${what}: 1 unit`);
  }
});

t.test("a cursor or an ETag of one tenant's rows is nothing to another's", async (t) => {
  const api = await tenantApp(t);
  const one = bearer(await keyFor(api, { tenant: 1 }));
  const two = bearer(await keyFor(api, { tenant: 2 }));
  const three = bearer(tokenFor({ tenant: 3 }));
  const first = await api.json('/v1/orders?page-size=5', { headers: one });
  const next = pathOf(first.body._links.next.href);
  t.equal((await api.json(next, { headers: one })).status, 200, 'its own cursor');
  const replayed = await api.json(next, { headers: two });
  t.equal(replayed.status, 400, "tenant 2 with tenant 1's cursor");
  t.equal(replayed.body.code, 'invalid_cursor');
  t.match(replayed.body.detail, /other rows/);
  const time = await api.json('/v1/orders?after=2000-01-01T00:00:00Z&page-size=5', { headers: one });
  t.equal((await api.json(pathOf(time.body._links.next.href), { headers: three })).body.code, 'invalid_cursor', 'a time cursor too');
  // The newest chunk of a time walk links poll instead of next: tenant 1's poll link is nothing to tenant 2.
  const newest = (await followNext('/v1/orders?after=2000-01-01T00:00:00Z&page-size=50', (path) => api.json(path, { headers: one }))).at(
    -1,
  );
  const poll = pathOf(newest._links.poll.href);
  t.equal((await api.json(poll, { headers: one })).status, 200, 'its own poll');
  const polled = await api.json(poll, { headers: two });
  t.equal(polled.status, 400, "tenant 2 polling with tenant 1's link");
  t.equal(polled.body.code, 'invalid_cursor');

  // Tenants 3 and 4 both have no paid order over 99: bodies alike, tags not.
  const empty = '/v1/orders?offset=0&limit=5&total[gt]=99&count=none';
  const four = bearer(tokenFor({ tenant: 4 }));
  const a = await api.request(empty, { headers: three });
  const b = await api.request(empty, { headers: four });
  t.equal(await a.text(), await b.text(), 'the same body');
  t.not(a.headers.get('etag'), b.headers.get('etag'), 'different tags');
  const again = await api.request(empty, { headers: { ...four, 'if-none-match': a.headers.get('etag')! } });
  t.equal(again.status, 200, "tenant 3's tag does not match tenant 4's chunk");
  const own = await api.request(empty, { headers: { ...three, 'if-none-match': a.headers.get('etag')! } });
  t.equal(own.status, 304, 'its own tag does');
});

t.test('no item outside the client’s rows ever appears, whatever the filters, sort and page size (property)', async (t) => {
  const api = await tenantApp(t);
  const keys = new Map<number, Record<string, string>>();
  for (const tenant of [1, 2, 3]) keys.set(tenant, bearer(await keyFor(api, { tenant })));
  const tenantOf = new Map(
    (await api.database.sql`select id, tenant_id from scratch.orders`).map((row) => [Number(row.id), Number(row.tenant_id)]),
  );
  const query = fc.record({
    tenant: fc.constantFrom(1, 2, 3),
    variant: fc.constantFrom('cursor', 'offset', 'page', 'time'),
    size: fc.integer({ min: 1, max: 50 }),
    status: fc.option(fc.subarray(STATUSES, { minLength: 1 }), { nil: undefined }),
    total: fc.option(fc.integer({ min: 0, max: 100 }), { nil: undefined }),
    tenantFilter: fc.option(fc.constantFrom(1, 2, 3), { nil: undefined }),
    descending: fc.boolean(),
  });
  await fc.assert(
    fc.asyncProperty(query, async (q) => {
      const params = new URLSearchParams();
      const set = (entries: Record<string, string>) => {
        for (const [name, value] of Object.entries(entries)) params.set(name, value);
      };
      const size = String(q.size);
      if (q.variant === 'offset') set({ limit: size, offset: '0', count: 'exact' });
      if (q.variant === 'page') set({ 'page-size': size, page: '0', count: 'exact' });
      if (q.variant === 'cursor') set({ 'page-size': size, sort: q.descending ? '-created_at' : 'created_at' });
      if (q.variant === 'time')
        set(q.descending ? { 'page-size': size, before: '2100-01-01T00:00:00Z' } : { 'page-size': size, after: '2000-01-01T00:00:00Z' });
      if (q.status) params.set(q.status.length === 1 ? 'status' : 'status[in]', q.status.join(','));
      if (q.total !== undefined) params.set('total[gt]', String(q.total));
      if (q.tenantFilter !== undefined) params.set('tenant_id', String(q.tenantFilter));
      const chunks = await followNext(`/v1/orders?${params}`, (path) => api.json(path, { headers: keys.get(q.tenant)! }));
      const seen = ids(chunks);
      const where = [
        q.status ? `status in (${q.status.map((s) => `'${s}'`).join(',')})` : 'true',
        q.total !== undefined ? `total > ${q.total}` : 'true',
        q.tenantFilter !== undefined ? `tenant_id = ${q.tenantFilter}` : 'true',
      ].join(' and ');
      const want = await expected(api, q.tenant, 'id', where);
      if (seen.some((id) => tenantOf.get(id) !== q.tenant)) throw new Error(`another tenant's row in ${params}`);
      if (JSON.stringify([...seen].sort((a, b) => a - b)) !== JSON.stringify(want)) throw new Error(`${params}: ${seen} != ${want}`);
      if (q.variant === 'offset' && chunks[0].size !== want.length) throw new Error(`size ${chunks[0].size} != ${want.length}`);
      if (q.variant === 'page' && chunks[0].totalPages !== Math.ceil(want.length / q.size)) throw new Error('totalPages');
    }),
    { numRuns: 60 },
  );
  t.pass('60 random walks, each exactly its rows');
});

t.test('identical requests at once share a statement only with clients whose rows are the same', async (t) => {
  const api = await tenantApp(t);
  const credentials = [1, 2, 3, 1, 2, 3].map((tenant, at) => ({ tenant, headers: bearer(tokenFor({ tenant, sub: `user-${at}` })) }));
  const answers = await Promise.all(credentials.map(({ headers }) => api.json('/v1/orders?page-size=50', { headers })));
  for (const [at, { tenant }] of credentials.entries()) {
    t.equal(answers[at]!.status, 200);
    t.same(ids([answers[at]!.body]), await expected(api, tenant), `tenant ${tenant}, asking beside the others: its rows`);
  }
});

t.test('the typed client reads a tenant’s rows with a key or a token, a token function asked before each request', async (t) => {
  const api = await tenantApp(t);
  const fetch = (input: string | URL | Request, init?: RequestInit) =>
    api.request(String(input).replace('http://test.local', ''), init as RequestInit & { address?: string });
  const walk = async (client: ReturnType<typeof createClient>) => {
    const seen: number[] = [];
    for await (const item of client.list('orders' as never, { 'page-size': 10 } as never)) seen.push((item as { id: number }).id);
    return seen;
  };
  t.same(
    await walk(createClient({ baseUrl: 'http://test.local', apiKey: await keyFor(api, { tenant: 2 }), fetch })),
    await expected(api, 2),
  );
  let asked = 0;
  const token = () => {
    asked++;
    return tokenFor({ tenant: 1 });
  };
  t.same(await walk(createClient({ baseUrl: 'http://test.local', token, fetch })), await expected(api, 1));
  t.equal(asked, Math.ceil(ROWS[1] / 10), 'the token function, once a chunk');
  t.throws(() => createClient({ baseUrl: 'http://test.local', apiKey: 'pck_x', token: 'y' }), TypeError);
});

t.test('a key set that cannot be fetched is a 503, not a 401, and charges nothing', async (t) => {
  const registry = await registryAhead(t, DDL, FILE);
  // Nothing listens on port 9 of the loopback: every fetch of the key set fails at once.
  const api = await testApp(t, { registry, rateLimit: true, env: { JWT_JWKS_URL: 'http://127.0.0.1:9/jwks.json' } });
  await seed(api);
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const token = `${part({ alg: 'RS256', kid: 'k1' })}.${part({ sub: 'u', tenant: 1, exp: Math.floor(Date.now() / 1000) + 60 })}.c2ln`;
  const res = await api.request('/v1/orders', { headers: bearer(token) });
  t.equal(res.status, 503);
  t.equal(((await res.json()) as { code: string }).code, 'unavailable');
  t.ok(Number(res.headers.get('retry-after')) >= 1, 'with Retry-After');
  const open = await api.request('/v1/directory', { address: '198.51.100.99' });
  t.equal(open.status, 200, 'anonymous reads go on');
});
