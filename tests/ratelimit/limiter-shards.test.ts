// LIMITER_DATABASE_URL with three limiter databases (private clusters, tests/helpers/cluster.ts) under three
// server processes: each subject decided exactly on its own database, keys and tiers on all three, one
// database away failing only its own subjects, and an operator's change refused while one is away.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { databaseIdentity } from '../../db/identity.ts';
import { runMigrations } from '../../db/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { hashKey } from '../../lib/ratelimit/identity.ts';
import { routingKeyOf, shardOf } from '../../lib/ratelimit/shards.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { startCluster } from '../helpers/cluster.ts';
import { scratchSession, testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

const clusters = [await startCluster(t), await startCluster(t), await startCluster(t)];
const urls = clusters.map((cluster) => cluster.url());
const identities = urls.map(databaseIdentity);
const limiters = urls.map((url) => scratchSession(t, url));
const data = await testDatabase(t);
await seedTable(data.sql, 'products', 100);
await seedTable(data.sql, 'orders', 10);
await seedTable(data.sql, 'events', 10);

// A key the third database holds and the first does not (a change half made): start-up removes it.
await runMigrations(urls[2]!);
await limiters[2]!`insert into paginated_collections.api_keys (id, key_hash, prefix, tier) values ('key_stray', '\\x00', 'pck_stray', 'free')`;

const env = { DATABASE_URL: data.url, LIMITER_DATABASE_URL: urls.join(','), ADMIN_TOKEN, TRUST_PROXY: 'loopback' };
const servers: ServerProcess[] = [];
for (let i = 0; i < 3; i++) servers.push(await startServer(t, await freePort(), env));

const admin = (method: string, path: string, body?: unknown) =>
  fetch(`${servers[0]!.url}/admin${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const shardOfKey = (key: string) => shardOf(identities, routingKeyOf(hashKey(key), ''));
const shardOfAddress = (address: string) => shardOf(identities, `ip:${address}`);

/** What the requests not served were answered, to say why when a count of the served is not as expected. */
const refusals: string[] = [];

/** Requests, `concurrency` at a time, round robin over the servers; the statuses in the order given. */
async function send(requests: { path: string; headers: Record<string, string> }[], concurrency: number): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const i = next++;
      const res = await fetch(`${servers[i % servers.length]!.url}${requests[i]!.path}`, { headers: requests[i]!.headers });
      const body = await res.text();
      statuses[i] = res.status;
      if (res.status !== 200) refusals.push(`${res.status} ${/"code":"([^"]*)"/.exec(body)?.[1] ?? body.slice(0, 100)}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return statuses;
}

const ok = (statuses: number[]) => statuses.filter((s) => s === 200).length;

/** Per database, one key on the tier `tiny` and one on `roomy`. */
const exactKeys: { key: string; id: string }[] = [];
const roomyKeys: { key: string; id: string }[] = [];

t.test("start-up made every limiter database hold the first one's keys and tiers", async (t) => {
  const [stray] = await limiters[2]!`select count(*)::int as n from paginated_collections.api_keys where id = 'key_stray'`;
  t.equal(stray?.n, 0, 'the stray key is gone');
});

t.test('keys and tiers reach every limiter database; each subject is exact on its own', async (t) => {
  for (const [name, limit] of [
    ['registration', 1000],
    ['tiny', 15],
    ['roomy', 1_000_000],
  ] as const) {
    const { status } = await admin('PUT', `/tiers/${name}`, { limit, windowSeconds: 3600, concurrency: 1000 });
    t.ok(status === 200 || status === 201, `${name}: ${status}, a 200 or 201`);
  }
  while (exactKeys.length < 3 || roomyKeys.length < 3) {
    const res = await fetch(`${servers[exactKeys.length % 3]!.url}/v1/keys`, { method: 'POST' });
    const issued = (await res.json()) as { key: string; id: string };
    const shard = shardOfKey(issued.key);
    if (!exactKeys.some((each) => shardOfKey(each.key) === shard)) exactKeys.push(issued);
    else if (!roomyKeys.some((each) => shardOfKey(each.key) === shard)) roomyKeys.push(issued);
  }
  for (const { id } of exactKeys) t.equal((await admin('PATCH', `/keys/${id}`, { tier: 'tiny' })).status, 200);
  for (const { id } of roomyKeys) t.equal((await admin('PATCH', `/keys/${id}`, { tier: 'roomy' })).status, 200);

  const copies = await Promise.all(
    limiters.map(async (sql) =>
      JSON.stringify([
        await sql`select * from paginated_collections.rate_tiers order by name`,
        await sql`select id, encode(key_hash, 'hex'), tier, revoked_at from paginated_collections.api_keys order by id`,
      ]),
    ),
  );
  t.equal(copies[1], copies[0], 'the second database holds the same keys and tiers as the first');
  t.equal(copies[2], copies[0], 'the third too');

  // The index: 1 unit and no statement of the data. A chunk's statement is charged its time past 50 ms, and
  // one that a starved machine held that long cost a 15-unit key its whole window in two full runs (0 of 45
  // served, 22 and 30 units used), which says nothing of the limiter databases this test is about.
  const requests = Array.from({ length: 135 }, (_, i) => ({
    path: '/v1',
    headers: { authorization: `Bearer ${exactKeys[i % 3]!.key}` },
  }));
  refusals.length = 0;
  const statuses = await send(requests, 24);
  // The 90 refused, by how: what to read when a count below is off.
  const refused = new Map<string, number>();
  for (const line of refusals) refused.set(line, (refused.get(line) ?? 0) + 1);
  t.comment(`refused: ${JSON.stringify([...refused])}`);
  for (let k = 0; k < 3; k++) {
    t.equal(
      ok(statuses.filter((_, i) => i % 3 === k)),
      15,
      `exactly 15 of 45 served on the key of database ${shardOfKey(exactKeys[k]!.key)}`,
    );
    const subject = `key:${exactKeys[k]!.id}`;
    const used = await Promise.all(
      limiters.map(async (sql) => (await sql`select used from paginated_collections.rate_windows where subject = ${subject}`)[0]?.used),
    );
    t.same(
      used.map((units) => (units === undefined ? null : Number(units))),
      identities.map((_, shard) => (shard === shardOfKey(exactKeys[k]!.key) ? 15 : null)),
      'its window on its own database only',
    );
  }
});

t.test('an address sending unknown keys is counted on its own database, whichever database each key routes to', async (t) => {
  t.equal((await admin('PUT', '/tiers/anonymous', { limit: 10, windowSeconds: 3600, concurrency: 1000 })).status, 200);
  const address = '203.0.113.9';
  const keys = Array.from({ length: 30 }, () => `pck_${randomBytes(24).toString('base64url')}`);
  t.ok(new Set(keys.map(shardOfKey)).size > 1, 'the keys route to several databases');
  const statuses = await send(
    keys.map((key) => ({ path: '/v1/orders', headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': address } })),
    6,
  );
  t.equal(statuses.filter((s) => s === 401).length, 10, 'exactly the allowance answered 401');
  t.equal(statuses.filter((s) => s === 429).length, 20, 'the rest 429');
  const [row] = await limiters[
    shardOfAddress(address)
  ]!`select used from paginated_collections.rate_windows where subject = ${`ip:${address}`}`;
  t.equal(Number(row?.used), 10, "the window on the address's own database holds the 10");
});

/** One request with each roomy key at every server: the statuses by key, and the Retry-After of each. */
async function roomy(): Promise<{ shard: number; statuses: number[]; retryAfter: (string | null)[] }[]> {
  return Promise.all(
    roomyKeys.map(async ({ key }) => {
      const answers = await Promise.all(
        servers.map(async (server) => {
          const res = await fetch(`${server.url}/v1/orders`, { headers: { authorization: `Bearer ${key}` } });
          await res.arrayBuffer();
          return { status: res.status, retryAfter: res.headers.get('retry-after') };
        }),
      );
      return { shard: shardOfKey(key), statuses: answers.map((a) => a.status), retryAfter: answers.map((a) => a.retryAfter) };
    }),
  );
}

t.test('one limiter database away: only its subjects are 503; an operator change is refused and made nowhere', async (t) => {
  const down = 1;
  const up = await roomy();
  // The key the checks below follow through the outage and back: one on each database, so one on that one.
  t.same(up.map((each) => each.shard).sort(), [0, 1, 2], 'a roomy key on each limiter database');
  t.same(
    up.map((each) => each.statuses),
    up.map(() => servers.map(() => 200)),
    'every key served by every instance while all are up',
  );
  await clusters[down]!.stop();
  for (const each of await roomy()) {
    if (each.shard === down) {
      t.same(each.statuses, [503, 503, 503], 'the key on the stopped database: 503 at every instance');
      t.same(each.retryAfter, ['1', '1', '1'], 'with Retry-After');
    } else {
      t.same(each.statuses, [200, 200, 200], `the key on database ${each.shard}: served at every instance`);
    }
  }
  t.equal((await fetch(`${servers[0]!.url}/readyz`)).status, 200, '/readyz: ready while any limiter database answers');

  const before = await Promise.all(
    [0, 2].map(async (i) => (await limiters[i]!`select count(*)::int as n from paginated_collections.api_keys`)[0]!.n),
  );
  const change = await admin('PUT', '/tiers/tiny', { limit: 16, windowSeconds: 3600, concurrency: 1000 });
  t.equal(change.status, 503, 'a tier change: 503');
  t.equal(change.headers.get('retry-after'), '1');
  const issue = await fetch(`${servers[1]!.url}/v1/keys`, { method: 'POST', headers: { 'x-forwarded-for': '198.51.100.7' } });
  t.equal(issue.status, 503, 'issuing a key: 503');
  for (const i of [0, 2]) {
    const [tier] = await limiters[i]!`select allowance from paginated_collections.rate_tiers where name = 'tiny'`;
    t.equal(tier?.allowance, 15, `database ${i}: the tier unchanged`);
  }
  const after = await Promise.all(
    [0, 2].map(async (i) => (await limiters[i]!`select count(*)::int as n from paginated_collections.api_keys`)[0]!.n),
  );
  t.same(after, before, 'no key issued anywhere');

  const since = performance.now();
  await clusters[down]!.start();
  await waitFor(
    'the key on the database back to be served at every instance',
    async () => (await roomy()).filter((each) => each.shard === down).every((each) => each.statuses.every((s) => s === 200)),
    { until: (served) => served, timeoutMs: 20_000, intervalMs: 20 },
  );
  const back = performance.now() - since;
  t.ok(back < 1500, `served again ${Math.round(back)} ms after pg_ctl start began`);
});
