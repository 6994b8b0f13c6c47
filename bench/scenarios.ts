// What `npm run bench` measures: the server processes it starts and the scenarios (rows) it runs against them.
// To add a row, append to `scenarios`; to measure a differently configured service, append to `servers`.
import { randomBytes } from 'node:crypto';
import type autocannon from 'autocannon';
import type { ServerVariant } from './processes.ts';
import type { Comparison, Load, Scenario, ScenarioContext } from './scenario-types.ts';

const PRICE_CHUNK = '/v1/products?page-size=20&sort=priceCents';
const HUNDRED_ITEMS = '/v1/products?limit=100&count=none';
const HUNDRED_CURSOR_ITEMS = '/v1/products?page-size=100';

/** Requests for `path` from another `since_id` each time: another chunk at every request, each as cheap to read. */
function anotherCursorEach(path: string, headers?: Record<string, string>): autocannon.Request[] {
  let next = randomBytes(3).readUIntBE(0, 3);
  return [
    {
      method: 'GET',
      path,
      headers,
      setupRequest: (request) => ({ ...request, path: `${path}&since_id=${1 + (next++ % 900_000)}` }),
    },
  ];
}

/** The path and query of an absolute href from a chunk's links. */
function pathOf(href: string): string {
  const url = new URL(href);
  return `${url.pathname}${url.search}`;
}

// The operator token of the service processes the bench starts; they live only as long as the bench.
const ADMIN_TOKEN = randomBytes(24).toString('hex');

/** Sets a tier through the operator API (docs/reference/api.md, "Operator API"), as an operator would at run time. */
async function putTier(origin: string, tier: string, body: { limit: number; windowSeconds: number; concurrency: number }) {
  const response = await fetch(`${origin}/admin/tiers/${tier}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`PUT /admin/tiers/${tier} answered ${response.status}: ${await response.text()}`);
}

export const servers: ServerVariant[] = [
  { name: 'hello', entry: 'bench/hello.ts', readyPath: '/' },
  // The least work that answers the rate-limited chunk below, the service's target (docs/benchmarks.md).
  { name: 'floor', entry: 'bench/floor-server.ts', readyPath: '/readyz' },
  {
    // The service as deployed, rate limiter on; the anonymous tier (all bench traffic comes from 127.0.0.1)
    // is raised so that it never declines, so these rows pay for the limiter's check but are never a 429.
    name: 'service',
    entry: 'server.ts',
    env: { ADMIN_TOKEN },
    readyPath: '/readyz',
    setup: (origin) => putTier(origin, 'anonymous', { limit: 1_000_000_000, windowSeconds: 60, concurrency: 1_000 }),
  },
  // The service without its request log (LOG_LEVEL=silent), and without the log nor metrics (no ADMIN_TOKEN,
  // so no /metrics and nothing counted): what a log line and the metrics cost a request. `service` above
  // logs at info, as deployed; its lines go to a pipe the bench reads, as a container runtime's would.
  {
    name: 'service, LOG_LEVEL=silent',
    entry: 'server.ts',
    env: { ADMIN_TOKEN, LOG_LEVEL: 'silent' },
    readyPath: '/readyz',
    setup: (origin) => putTier(origin, 'anonymous', { limit: 1_000_000_000, windowSeconds: 60, concurrency: 1_000 }),
  },
  { name: 'service, LOG_LEVEL=silent, no metrics', entry: 'server.ts', env: { LOG_LEVEL: 'silent' }, readyPath: '/readyz' },
  // The service without holds (LIMITER_HOLD_MS=0): a key over its allowance is answered as fast as it asks, so that
  // the declined rows measure what a refusal itself costs, not the pause of a client that asks again too soon.
  { name: 'service, LIMITER_HOLD_MS=0', entry: 'server.ts', env: { ADMIN_TOKEN, LIMITER_HOLD_MS: '0' }, readyPath: '/readyz' },
  // What a team would build by hand instead of the service (docs/reference/bench.md, "The Fastify peer"): Fastify,
  // @fastify/rate-limit counting in Redis, CORS, a response schema, a request log line at info, as deployed.
  { name: 'Fastify peer', entry: 'bench/peer-fastify.ts', readyPath: '/readyz', redis: true },
];

/**
 * A key on a tier of one unit an hour, that unit spent: the default request, every answer a 429. Made in the
 * database (a tier of its own, the key's registration allowed again), so that every round gets a fresh key.
 */
async function keyOverItsAllowance({ origin, sql }: ScenarioContext): Promise<Load> {
  await sql`
    insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency) values ('bench-declined', 1, 3600, 1000)
    on conflict (name) do update set allowance = 1, window_seconds = 3600, concurrency = 1000`;
  await sql`delete from paginated_collections.rate_windows where subject like 'reg:%'`;
  const registered = await fetch(`${origin}/v1/keys`, { method: 'POST', body: JSON.stringify({ name: 'bench-declined' }) });
  if (registered.status !== 201) throw new Error(`POST /v1/keys answered ${registered.status}: ${await registered.text()}`);
  const { id, key } = (await registered.json()) as { id: string; key: string };
  await sql`update paginated_collections.api_keys set tier = 'bench-declined' where id = ${id}`;
  const headers = { authorization: `Bearer ${key}` };
  const spent = await fetch(`${origin}/v1/products`, { headers });
  await spent.arrayBuffer();
  if (spent.status !== 200) throw new Error(`The key's one unit: ${spent.status}`);
  return { path: '/v1/products', headers };
}

/** The anonymous tier raised directly in the database, for a service with no operator API to ask. */
async function raiseAnonymous({ sql }: ScenarioContext): Promise<undefined> {
  await sql`update paginated_collections.rate_tiers set allowance = 1000000000, window_seconds = 60, concurrency = 1000 where name = 'anonymous'`;
  return undefined;
}

// The same service on other terms: as behind a transaction pooler (`prepare=false` in DATABASE_URL: no named
// statements, no pipelining; docs/how-to/pgbouncer.md), yet against PostgreSQL directly, so the
// row measures what the pooled mode costs the service itself; and on Deno and Bun.
const service = servers.find((server) => server.name === 'service')!;
servers.push(
  {
    ...service,
    name: 'service, prepare off',
    url: (databaseUrl) => {
      const url = new URL(databaseUrl);
      url.searchParams.set('prepare', 'false');
      return url.toString();
    },
  },
  { ...service, name: 'service on Deno', entry: 'server.deno.ts', runtime: 'deno' },
  { ...service, name: 'service on Bun', entry: 'server.bun.ts', runtime: 'bun' },
);

export const scenarios: Scenario[] = [
  { name: 'Hono hello world', server: 'hello', path: '/', baseline: true },
  { name: 'first chunk', server: 'service', path: '/v1/products' },
  { name: 'offset 900,000, count=none', server: 'service', path: '/v1/products?offset=900000&count=none' },
  { name: 'page 0, count=exact', server: 'service', path: '/v1/products?page=0&count=exact' },
  { name: 'page 0, count=estimated', server: 'service', path: '/v1/products?page=0&count=estimated' },
  // The latency of an estimated count at one client: one request at a time, nothing queued.
  { name: 'page 0, count=estimated, 1 client', server: 'service', path: '/v1/products?page=0&count=estimated', connections: 1 },
  { name: 'first cursor chunk', server: 'service', path: '/v1/products?page-size=20' },
  {
    // A cursor the service issued at depth ~900,000: the next link of the since_id=900000 chunk,
    // beside the offset row at the same depth.
    name: 'cursor at ~900,000',
    server: 'service',
    setup: async ({ origin }) => {
      const response = await fetch(`${origin}/v1/products?since_id=900000&page-size=20`);
      const body = (await response.json()) as { _links?: { next?: { href: string } } };
      const href = body._links?.next?.href;
      if (!response.ok || !href) throw new Error(`since_id=900000 answered ${response.status} without a next link`);
      return { path: pathOf(href) };
    },
  },
  // A 100-item chunk (well past the compression threshold) as it is and compressed (lib/http/compression.ts): what compressing
  // costs per request, beside the same chunk sent as it is.
  { name: '100 items, as they are', server: 'service', path: HUNDRED_ITEMS },
  { name: '100 items, gzip', server: 'service', path: HUNDRED_ITEMS, headers: { 'accept-encoding': 'gzip' } },
  { name: '100 items, br', server: 'service', path: HUNDRED_ITEMS, headers: { 'accept-encoding': 'gzip, deflate, br' } },
  // The same three with another 100-item chunk at every request, so that none is sent again from the
  // compressed chunks the service keeps: what compressing costs when every request pays for it.
  ...(
    [
      ['as they are', undefined],
      ['gzip', { 'accept-encoding': 'gzip' }],
      ['br', { 'accept-encoding': 'gzip, deflate, br' }],
    ] as const
  ).map(([encoding, headers]) => ({
    name: `100 items, another chunk each, ${encoding}`,
    server: 'service',
    requests: anotherCursorEach(HUNDRED_CURSOR_ITEMS, headers),
  })),
  {
    // A client polling the time variant's poll link of the newest events with the ETag it has: a 304, whose
    // units the limiter gives back in the lease release (docs/reference/costs.md, "Conditional requests").
    name: 'poll link, 304',
    server: 'service',
    expectStatus: 304,
    setup: async ({ origin }) => {
      const newest = (await (await fetch(`${origin}/v1/events?page-size=20`)).json()) as { _links: { prev: { href: string } } };
      const empty = (await (await fetch(newest._links.prev.href)).json()) as { _links: { poll?: { href: string } } };
      const poll = empty._links.poll?.href;
      if (!poll) throw new Error('The chunk past the newest event has no poll link');
      const etag = (await fetch(poll)).headers.get('etag');
      if (!etag) throw new Error('The poll link answered without an ETag');
      return { path: pathOf(poll), headers: { 'if-none-match': etag } };
    },
  },
  // A key over its allowance, sending the default request: every answer a 429, what a storm's declined
  // requests cost the service (docs/explanation/counts.md, "The count storm").
  { name: 'declined: a key over its allowance, 429', server: 'service, LIMITER_HOLD_MS=0', expectStatus: 429, setup: keyOverItsAllowance },
  // The service's rate-limited chunk (limiter and concurrency cap on) beside the floor answering the same
  // request with the least work this stack allows: one prepared counter upsert, one prepared keyset select.
  { name: 'sort=priceCents, 32 clients: service', server: 'service', path: PRICE_CHUNK, connections: 32 },
  { name: 'sort=priceCents, 32 clients: floor', server: 'floor', path: PRICE_CHUNK, connections: 32 },
  // The same two with another chunk at every request, so that no read can be shared (lib/pagination/shared-reads.ts,
  // runShape): what the service costs when every client asks for its own rows.
  {
    name: 'sort=priceCents, 32 clients, another chunk each: service',
    server: 'service',
    requests: anotherPriceEach(PRICE_CHUNK),
    connections: 32,
  },
  {
    name: 'sort=priceCents, 32 clients, another chunk each: floor',
    server: 'floor',
    requests: anotherPriceEach(PRICE_CHUNK),
    connections: 32,
  },
  // The service without any rate limiter (bench/limiter-server.ts) on the same requests: how much of the floor's
  // margin the rest of the request path takes, the floor's counter upsert being its whole limiter.
  {
    name: 'sort=priceCents, 32 clients, another chunk each: limiter off',
    server: 'limiter off',
    requests: anotherPriceEach(PRICE_CHUNK),
    connections: 32,
  },
  // The same requests from a key over its allowance: every answer a 429, a refusal on the served chunk's
  // footing (same request, clients and server), so that the two rows' CPU per request compare.
  {
    name: 'sort=priceCents, 32 clients, another chunk each: declined, 429',
    server: 'service, LIMITER_HOLD_MS=0',
    expectStatus: 429,
    connections: 32,
    setup: async (context) => ({ requests: anotherPriceEach(PRICE_CHUNK, (await keyOverItsAllowance(context)).headers) }),
  },
  // The same two again on the Fastify peer, the chunk as a team would serve it by hand with a Redis limiter.
  { name: 'sort=priceCents, 32 clients: Fastify peer', server: 'Fastify peer', path: PRICE_CHUNK, connections: 32 },
  {
    name: 'sort=priceCents, 32 clients, another chunk each: Fastify peer',
    server: 'Fastify peer',
    requests: anotherPriceEach(PRICE_CHUNK),
    connections: 32,
  },
  // The cost of the request log and of the metrics: the same chunk without them (docs/benchmarks.md).
  {
    name: 'sort=priceCents, 32 clients: service, LOG_LEVEL=silent',
    server: 'service, LOG_LEVEL=silent',
    path: PRICE_CHUNK,
    connections: 32,
  },
  {
    name: 'sort=priceCents, 32 clients: service, LOG_LEVEL=silent, no metrics',
    server: 'service, LOG_LEVEL=silent, no metrics',
    path: PRICE_CHUNK,
    connections: 32,
    setup: raiseAnonymous,
  },
  { name: 'sort=priceCents, 32 clients: service, prepare off', server: 'service, prepare off', path: PRICE_CHUNK, connections: 32 },
  { name: 'sort=priceCents, 32 clients: service on Deno', server: 'service on Deno', path: PRICE_CHUNK, connections: 32 },
  { name: 'sort=priceCents, 32 clients: service on Bun', server: 'service on Bun', path: PRICE_CHUNK, connections: 32 },
];

// The rate limiter's rows (bench/limiter-scenarios.ts): the chunk with the limiter off and on, one hot key
// and many keys, and rate-limiter-flexible's Postgres store as the peer.
import { anotherPriceEach, limiterScenarios, limiterServers } from './limiter-scenarios.ts';

servers.push(...limiterServers);
scenarios.push(...limiterScenarios);

// A tenant's chunk by a filter and a key, and through a row rule with keys with claims and with tokens
// (bench/tenant-scenarios.ts): on a table and a server of their own.
import { tenantComparisons, tenantScenarios, tenantServer } from './tenant-scenarios.ts';

servers.push(tenantServer);
scenarios.push(...tenantScenarios);

// The limiter's decisions with its default asynchronous commit and with LIMITER_SYNCHRONOUS_COMMIT=on
// (bench/sync-commit-scenarios.ts): what losing no decision in a failover costs.
import { syncCommitComparisons, syncCommitScenarios, syncCommitServers } from './sync-commit-scenarios.ts';

servers.push(...syncCommitServers);
scenarios.push(...syncCommitScenarios);

/** The ratios printed below the table, with the targets they are held to; a row left out by --only skips its ratios. */
export const comparisons: Comparison[] = [
  {
    label: 'service / floor, sort=priceCents, 32 clients',
    of: 'sort=priceCents, 32 clients: service',
    to: 'sort=priceCents, 32 clients: floor',
    target: { measure: 'req/s', atLeast: 1.0 },
  },
  // The service's Node CPU per chunk when no read is shared: at most 1.25 times the floor's.
  {
    label: 'service / floor, sort=priceCents, 32 clients, another chunk each',
    of: 'sort=priceCents, 32 clients, another chunk each: service',
    to: 'sort=priceCents, 32 clients, another chunk each: floor',
    target: { measure: 'server/req', atMost: 1.25 },
  },
  // Measured, held to no target: the service without its limiter beside the floor, whose limiter is one upsert.
  {
    label: 'limiter off / floor, sort=priceCents, 32 clients, another chunk each',
    of: 'sort=priceCents, 32 clients, another chunk each: limiter off',
    to: 'sort=priceCents, 32 clients, another chunk each: floor',
  },
  // A refusal costs the service's Node at most a third of what a served chunk does.
  {
    label: 'refusal / served chunk, server CPU',
    of: 'sort=priceCents, 32 clients, another chunk each: declined, 429',
    to: 'sort=priceCents, 32 clients, another chunk each: service',
    target: { measure: 'server/req', atMost: 0.33 },
  },
  // The service beside what a team would write by hand with Fastify and a Redis limiter: at least 0.8 of its
  // rate when no read can be shared; measured, held to no target, when all clients ask for the same chunk.
  {
    label: 'service / Fastify peer, sort=priceCents, 32 clients',
    of: 'sort=priceCents, 32 clients: service',
    to: 'sort=priceCents, 32 clients: Fastify peer',
  },
  {
    label: 'service / Fastify peer, sort=priceCents, 32 clients, another chunk each',
    of: 'sort=priceCents, 32 clients, another chunk each: service',
    to: 'sort=priceCents, 32 clients, another chunk each: Fastify peer',
    target: { measure: 'req/s', atLeast: 0.8 },
  },
  ...['limiter: chunk', 'limiter, 64 clients: chunk'].flatMap((prefix) =>
    ['one hot key', '1000 keys'].map((keys) => ({
      label: `limiter on / off, ${prefix.startsWith('limiter,') ? '64' : '10'} clients, ${keys}`,
      of: `${prefix}, ours, ${keys}`,
      to: `${prefix}, limiter off`,
      target: { measure: 'req/s' as const, atLeast: 0.8 },
    })),
  ),
  // Measured, held to no target: the limiter beside a chunk no two requests share.
  {
    label: 'limiter on / off, 10 clients, one hot key, another chunk each',
    of: 'limiter: another chunk each, ours, one hot key',
    to: 'limiter: another chunk each, limiter off',
  },
  // Measured, held to no target: the limiter against its round trips alone, then against no limiter.
  ...['limiter: chunk', 'limiter, 64 clients: chunk'].flatMap((prefix) => {
    const clients = prefix.startsWith('limiter,') ? '64' : '10';
    return [
      {
        label: `two bare round trips / limiter off, ${clients} clients`,
        of: `${prefix}, two bare round trips`,
        to: `${prefix}, limiter off`,
      },
      {
        label: `limiter on / two bare round trips, ${clients} clients, one hot key`,
        of: `${prefix}, ours, one hot key`,
        to: `${prefix}, two bare round trips`,
      },
    ];
  }),
  // Measured, held to no target: what the pooled mode and the other runtimes cost or gain.
  ...[', prepare off', ' on Deno', ' on Bun'].map((variant) => ({
    label: `service${variant} / service, sort=priceCents, 32 clients`,
    of: `sort=priceCents, 32 clients: service${variant}`,
    to: 'sort=priceCents, 32 clients: service',
  })),
  {
    label: 'service with its request log / without (LOG_LEVEL=silent), sort=priceCents, 32 clients',
    of: 'sort=priceCents, 32 clients: service',
    to: 'sort=priceCents, 32 clients: service, LOG_LEVEL=silent',
  },
  {
    label: 'service with metrics / without, no request log, sort=priceCents, 32 clients',
    of: 'sort=priceCents, 32 clients: service, LOG_LEVEL=silent',
    to: 'sort=priceCents, 32 clients: service, LOG_LEVEL=silent, no metrics',
  },
  // Compression's cost, held to a bound: a compressed 100-item chunk keeps most of the uncompressed one's
  // throughput (docs/benchmarks.md, "Compression").
  ...(['br', 'gzip'] as const).flatMap((encoding) =>
    ['', ', another chunk each'].map((each) => ({
      label: `100 items${each}, ${encoding} / as they are`,
      of: `100 items${each}, ${encoding}`,
      to: `100 items${each}, as they are`,
      target: { measure: 'req/s' as const, atLeast: 0.85 },
    })),
  ),
  {
    label: 'cursor at ~900,000 / first cursor chunk',
    of: 'cursor at ~900,000',
    to: 'first cursor chunk',
    target: { measure: 'time/req', atMost: 1.1 },
  },
  ...tenantComparisons,
  ...syncCommitComparisons,
];

/** Rows whose mean latency is held to a bound, in milliseconds. */
export const latencyTargets: { row: string; atMostMs: number }[] = [{ row: 'page 0, count=estimated, 1 client', atMostMs: 2 }];
