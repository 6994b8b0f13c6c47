// Decisions per second with 1, 2 and 3 limiter databases (LIMITER_DATABASE_URL), each a private cluster
// (tests/helpers/cluster.ts), the data on a fourth: `node bench/limiter-shards.ts [seconds] [connections]`.
// Every request is GET /v1 (the index: a decision and a release, no data query) with one of 1,000 keys in
// turn, on a tier that never declines. What this measures on a machine whose cores every cluster, the
// server and the load generator share: docs/how-to/limiter-databases.md, "Several limiter databases".
import { createHash } from 'node:crypto';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { databaseIdentity } from '../db/identity.ts';
import { runMigrations } from '../db/migrate.ts';
import { migrateDemo } from '../demo/migrate.ts';
import { seedTable } from '../demo/seed.ts';
import { routingKeyOf, shardOf } from '../lib/ratelimit/shards.ts';
import { type Cluster, startCluster } from '../tests/helpers/cluster.ts';
import { startServer } from './processes.ts';

const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 64);
const KEYS = 1000;
const keyOf = (i: number) => `pck_${createHash('sha256').update(`shards-${i}`).digest('base64url').slice(0, 32)}`;

const teardowns: (() => unknown)[] = [];
const owner = { teardown: (fn: () => unknown) => teardowns.push(fn) };
async function cleanUp(): Promise<void> {
  for (const fn of teardowns.reverse()) await fn();
}
process.on('SIGINT', () => void cleanUp().then(() => process.exit(130)));

try {
  // pg_stat_user_functions counts the calls of rate_decide on each database: how the decisions spread.
  const track = { track_functions: "'pl'", max_connections: '50' };
  const data: Cluster = await startCluster(owner);
  const limiters: Cluster[] = [await startCluster(owner, track), await startCluster(owner, track), await startCluster(owner, track)];
  await migrateDemo(data.url());
  const seed = postgres(data.url(), { max: 1, onnotice: () => {} });
  for (const table of ['products', 'orders', 'events'] as const) await seedTable(seed, table, 10);
  await seed.end();
  // The keys go to the first limiter database only: start-up copies them to the others (lib/ratelimit/key-store.ts),
  // since the first row runs on it alone, so it records itself first and stays the source of truth (record-order.ts).
  await runMigrations(limiters[0]!.url());
  const first = postgres(limiters[0]!.url(), { max: 1, onnotice: () => {} });
  await first`insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency) values ('bench', 1000000000, 60, 1000)`;
  const rows = Array.from({ length: KEYS }, (_, i) => ({
    id: `key_shards_${i}`,
    key_hash: createHash('sha256').update(keyOf(i)).digest(),
    prefix: keyOf(i).slice(0, 10),
    tier: 'bench',
  }));
  await first`insert into paginated_collections.api_keys ${first(rows)}`;
  await first.end();

  console.log(`${KEYS} keys, GET /v1, ${connections} connections, ${seconds} s per row, one server process`);
  console.log('| limiter databases | req/s | non-2xx | rate_decide calls per database | keys per database |');
  console.log('| ---: | ---: | ---: | --- | --- |');
  for (const count of [1, 2, 3]) {
    const urls = limiters.slice(0, count).map((cluster) => cluster.url());
    const identities = urls.map(databaseIdentity);
    const keysPer = identities.map(
      (_, shard) =>
        Array.from({ length: KEYS }, (_, i) => i).filter(
          (i) => shardOf(identities, routingKeyOf(createHash('sha256').update(keyOf(i)).digest(), '')) === shard,
        ).length,
    );
    const server = await startServer(
      {
        name: `limiters-${count}`,
        entry: 'server.ts',
        readyPath: '/readyz',
        env: { LIMITER_DATABASE_URL: urls.join(','), LOG_LEVEL: 'silent', COLLECTIONS: 'demo' },
      },
      data.url(),
    );
    teardowns.push(() => server.stop());
    for (const url of urls) {
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      await sql`truncate paginated_collections.rate_windows`;
      await sql`select pg_stat_reset()`;
      await sql.end();
    }
    let next = 0;
    const result = await autocannon({
      url: `${server.origin}/v1`,
      connections,
      duration: seconds,
      requests: [
        { method: 'GET', setupRequest: (request) => ({ ...request, headers: { authorization: `Bearer ${keyOf(next++ % KEYS)}` } }) },
      ],
    });
    const calls: number[] = [];
    for (const url of urls) {
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      // The statistics collector reports with a delay of up to half a second.
      await new Promise((resolve) => setTimeout(resolve, 700));
      const [row] = await sql`select coalesce(sum(calls), 0)::int as calls from pg_stat_user_functions where funcname = 'rate_decide'`;
      calls.push(row!.calls as number);
      await sql.end();
    }
    await server.stop();
    teardowns.pop();
    console.log(
      `| ${count} | ${Math.round(result.requests.average)} | ${result.non2xx + result.errors} | ${calls.join(' / ')} | ${keysPer.join(' / ')} |`,
    );
  }
} finally {
  await cleanUp();
}
