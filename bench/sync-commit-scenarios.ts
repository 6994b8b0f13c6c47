// The synchronous commit rows of `npm run bench`: the same rate-limited chunk decided with the limiter's default
// asynchronous commit and with LIMITER_SYNCHRONOUS_COMMIT=on (docs/explanation/rate-limit.md, "Asynchronous
// commit"), for one hot key and for many keys. On the bench's one PostgreSQL, `on` waits for the primary's own
// WAL flush at each limiter statement; with a synchronous standby it waits for the standby's too, which these rows
// do not measure.
import { createHash, randomBytes } from 'node:crypto';
import type autocannon from 'autocannon';
import type { Sql } from 'postgres';
import type { ServerVariant } from './processes.ts';
import type { Comparison, Scenario } from './scenario-types.ts';

// Cost 1 (20 items, no count): one unit per request, decided in one limiter statement with its neighbours'.
const CHUNK = '/v1/products?count=none';
const KEYS = 1_000;
const TIER = 'bench-sync-commit';

const keyOf = (i: number) => `pck_${createHash('sha256').update(`bench-sync-commit-${i}`).digest('base64url').slice(0, 32)}`;

/** Keys 0 … KEYS-1 on a tier that never declines, so that the rows measure decisions, not 429s. */
async function insertKeys({ sql }: { sql: Sql }): Promise<undefined> {
  await sql`
    insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency)
    values (${TIER}, 1000000000, 60, 1000)
    on conflict (name) do update set allowance = excluded.allowance, concurrency = excluded.concurrency`;
  const rows = Array.from({ length: KEYS }, (_, i) => ({
    id: `key_bench_sync_${i}`,
    key_hash: createHash('sha256').update(keyOf(i)).digest(),
    prefix: keyOf(i).slice(0, 10),
    tier: TIER,
  }));
  await sql`insert into paginated_collections.api_keys ${sql(rows)} on conflict (id) do nothing`;
  return undefined;
}

/** Each request carries one of the keys, in turn. */
function manyKeys(): autocannon.Request[] {
  let next = randomBytes(2).readUInt16BE() % KEYS;
  return [
    {
      method: 'GET',
      path: CHUNK,
      setupRequest: (request) => ({ ...request, headers: { authorization: `Bearer ${keyOf(next++ % KEYS)}` } }),
    },
  ];
}

const COMMITS = { off: 'service, limiter commit off', on: 'service, LIMITER_SYNCHRONOUS_COMMIT=on' } as const;

/** The service as deployed, once with each commit: its own servers, so that the two rows differ by the setting only. */
export const syncCommitServers: ServerVariant[] = [
  { name: COMMITS.off, entry: 'server.ts', readyPath: '/readyz' },
  { name: COMMITS.on, entry: 'server.ts', env: { LIMITER_SYNCHRONOUS_COMMIT: 'on' }, readyPath: '/readyz' },
];

const rowName = (keys: string, clients: number, commit: keyof typeof COMMITS) => `decisions, ${keys}, ${clients} clients: commit ${commit}`;

export const syncCommitScenarios: Scenario[] = (['off', 'on'] as const).flatMap((commit) => [
  {
    name: rowName('one hot key', 10, commit),
    server: COMMITS[commit],
    path: CHUNK,
    headers: { authorization: `Bearer ${keyOf(0)}` },
    connections: 10,
    setup: insertKeys,
  },
  {
    name: rowName(`${KEYS} keys`, 64, commit),
    server: COMMITS[commit],
    connections: 64,
    setup: async (context) => {
      await insertKeys(context);
      return { requests: manyKeys() };
    },
  },
]);

/** Measured, held to no target: what synchronous commit costs the decisions' rate. */
export const syncCommitComparisons: Comparison[] = [
  ['one hot key', 10],
  [`${KEYS} keys`, 64],
].map(([keys, clients]) => ({
  label: `LIMITER_SYNCHRONOUS_COMMIT on / off, ${keys}, ${clients} clients`,
  of: rowName(String(keys), Number(clients), 'on'),
  to: rowName(String(keys), Number(clients), 'off'),
}));
