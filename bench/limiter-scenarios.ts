// The rate limiter's rows of `npm run bench`: the same chunk with our limiter off and on (one hot key,
// many keys; with and without the concurrency cap) and, as the peer, behind rate-limiter-flexible's
// Postgres store (a fixed window, no cap). Compare the rows' ratios.
import { createHash, randomBytes } from 'node:crypto';
import type autocannon from 'autocannon';
import type { Sql } from 'postgres';
import type { ServerVariant } from './processes.ts';
import type { Scenario } from './scenario-types.ts';

// Cost 1 with our rule (20 items, no count): both limiters charge one unit per request.
const CHUNK = '/v1/products?count=none';
const MANY = 1_000;

const keyOf = (i: number) => `pck_${createHash('sha256').update(`bench-${i}`).digest('base64url').slice(0, 32)}`;

/** Keys 0 … count-1 on a tier that never declines, so every row measures the check, not 429s. */
async function insertKeys(sql: Sql, count: number): Promise<void> {
  await sql`
    insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency)
    values ('bench', 1000000000, 60, 1000)
    on conflict (name) do update set allowance = excluded.allowance, concurrency = excluded.concurrency`;
  const rows = Array.from({ length: count }, (_, i) => ({
    id: `key_bench_${i}`,
    key_hash: createHash('sha256').update(keyOf(i)).digest(),
    prefix: keyOf(i).slice(0, 10),
    tier: 'bench',
  }));
  await sql`insert into paginated_collections.api_keys ${sql(rows)} on conflict (id) do nothing`;
}

/** Each request carries one of `count` keys, in turn. */
function manyKeys(count: number): autocannon.Request[] {
  let next = randomBytes(2).readUInt16BE() % count;
  return [
    {
      method: 'GET',
      path: CHUNK,
      setupRequest: (request) => ({ ...request, headers: { authorization: `Bearer ${keyOf(next++ % count)}` } }),
    },
  ];
}

const hotKey = { authorization: `Bearer ${keyOf(0)}` };

/** A row's setup: the bench's keys in the database, the load left as the row says. */
async function withKeys({ sql }: { sql: Sql }): Promise<undefined> {
  await insertKeys(sql, MANY);
  return undefined;
}

/**
 * `path` (a chunk sorted by price) from another price at every request, in turn (prices are 100 to 99,999
 * cents): no two requests in flight read the same rows, so none can share a read (lib/pagination/shared-reads.ts).
 */
export function anotherPriceEach(path: string, headers?: Record<string, string>): autocannon.Request[] {
  let next = randomBytes(2).readUInt16BE();
  return [
    {
      method: 'GET',
      path,
      headers,
      setupRequest: (request) => ({ ...request, path: `${path}&priceCents[gte]=${100 + (next++ % 99_900)}` }),
    },
  ];
}

// With an operator token like the service's, so that they keep the same metrics (bench/limiter-server.ts).
const ADMIN_TOKEN = randomBytes(24).toString('hex');

export const limiterServers: ServerVariant[] = [
  { name: 'limiter off', entry: 'bench/limiter-server.ts', env: { BENCH_LIMITER: 'off', ADMIN_TOKEN }, readyPath: '/readyz' },
  { name: 'ours, no cap', entry: 'bench/limiter-server.ts', env: { BENCH_LIMITER: 'rate-only', ADMIN_TOKEN }, readyPath: '/readyz' },
  { name: 'peer (rlf Postgres)', entry: 'bench/limiter-server.ts', env: { BENCH_LIMITER: 'peer', ADMIN_TOKEN }, readyPath: '/readyz' },
  {
    name: 'two bare round trips',
    entry: 'bench/limiter-server.ts',
    env: { BENCH_LIMITER: 'round-trips', ADMIN_TOKEN },
    readyPath: '/readyz',
  },
];

/**
 * The limiter's rows for `clients` at once (default: `--connections`, 10). At 10 the machine has CPU to
 * spare and req/s measures each request's waits; at 64 it is saturated and req/s measures the work per
 * request, which is what a server's capacity is.
 */
function limiterRows(clients?: number): Scenario[] {
  const prefix = clients === undefined ? 'limiter: chunk' : `limiter, ${clients} clients: chunk`;
  const many = async ({ sql }: { sql: Sql }) => {
    await insertKeys(sql, MANY);
    return { requests: manyKeys(MANY) };
  };
  return [
    { name: `${prefix}, limiter off`, server: 'limiter off', path: CHUNK },
    // The round trips of a decision and a release, one each per request, with nothing decided.
    { name: `${prefix}, two bare round trips`, server: 'two bare round trips', path: CHUNK },
    { name: `${prefix}, ours, one hot key`, server: 'service', path: CHUNK, headers: hotKey, setup: withKeys },
    { name: `${prefix}, ours, ${MANY} keys`, server: 'service', setup: many },
    // Our rate limit without the concurrency cap, like the peer: a decision and no lease release.
    { name: `${prefix}, ours w/o cap, one hot key`, server: 'ours, no cap', path: CHUNK, headers: hotKey, setup: withKeys },
    { name: `${prefix}, ours w/o cap, ${MANY} keys`, server: 'ours, no cap', setup: many },
    { name: `${prefix}, peer, one hot key`, server: 'peer (rlf Postgres)', path: CHUNK, headers: hotKey },
    { name: `${prefix}, peer, ${MANY} keys`, server: 'peer (rlf Postgres)', setup: async () => ({ requests: manyKeys(MANY) }) },
  ].map((row) => ({ ...row, connections: clients }));
}

// The chunk from another price at every request, so that no read is shared: what the limiter costs beside
// a chunk that cannot be shared, as before identical reads shared statements (docs/benchmarks.md).
const PRICE_CHUNK = '/v1/products?count=none&sort=priceCents';
const anotherChunkEach: Scenario[] = [
  { name: 'limiter: another chunk each, limiter off', server: 'limiter off', requests: anotherPriceEach(PRICE_CHUNK) },
  {
    name: 'limiter: another chunk each, ours, one hot key',
    server: 'service',
    requests: anotherPriceEach(PRICE_CHUNK, hotKey),
    setup: withKeys,
  },
];

export const limiterScenarios: Scenario[] = [...limiterRows(), ...anotherChunkEach, ...limiterRows(64)];
