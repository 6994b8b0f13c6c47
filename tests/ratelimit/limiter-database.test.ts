// LIMITER_DATABASE_URL: the limiter on a database of its own, beside the data database, each a private
// cluster (tests/helpers/cluster.ts); three server processes share both. Exact across the instances, keys and
// tiers changed through /admin seen by all, every row where it belongs, each database's outage a 503.
import type { Sql } from 'postgres';
import t from 'tap';
import { migrateDemo } from '../../demo/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { startCluster } from '../helpers/cluster.ts';
import { scratchSession, withSession } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

const data = await startCluster(t);
const limiterDb = await startCluster(t);
await migrateDemo(data.url());
await withSession(data.url(), async (seed) => {
  await seedTable(seed, 'products', 100);
  await seedTable(seed, 'orders', 10);
  await seedTable(seed, 'events', 10);
});

const env = { DATABASE_URL: data.url(), LIMITER_DATABASE_URL: limiterDb.url(), ADMIN_TOKEN };
const servers: ServerProcess[] = [];
for (let i = 0; i < 3; i++) servers.push(await startServer(t, await freePort(), env));
const onData = scratchSession(t, data.url());
const onLimiter = scratchSession(t, limiterDb.url());

const admin = (server: ServerProcess, method: string, path: string, body?: unknown) =>
  fetch(`${server.url}/admin${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** `count` requests for `path`, `concurrency` at a time, round robin over the servers; the statuses. */
async function blast(path: string, count: number, concurrency: number, headers: Record<string, string> = {}): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const server = servers[next++ % servers.length]!;
      const res = await fetch(`${server.url}${path}`, { headers });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return statuses;
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

let key = '';
let keyId = '';

t.test('keys and tiers are written to the limiter database, and every instance decides exactly on it', async (t) => {
  t.equal((await admin(servers[0]!, 'PUT', '/tiers/tiny', { limit: 20, windowSeconds: 3600, concurrency: 1000 })).status, 201);
  const issued = await fetch(`${servers[1]!.url}/v1/keys`, { method: 'POST' });
  t.equal(issued.status, 201);
  ({ key, id: keyId } = (await issued.json()) as { key: string; id: string });
  t.equal((await admin(servers[2]!, 'PATCH', `/keys/${keyId}`, { tier: 'tiny' })).status, 200);

  const statuses = await blast('/v1/orders', 90, 24, { authorization: `Bearer ${key}` });
  t.equal(count(statuses, 200), 20, 'exactly the allowance served, across three instances');
  t.equal(count(statuses, 429), 70, 'the rest declined');

  // A tier raised through one instance is seen by every other at its next request.
  t.equal((await admin(servers[1]!, 'PUT', '/tiers/tiny', { limit: 25, windowSeconds: 3600, concurrency: 1000 })).status, 200);
  const more = await blast('/v1/orders', 30, 12, { authorization: `Bearer ${key}` });
  t.equal(count(more, 200), 5, 'five more, once the tier allows 25');

  const [window] = await onLimiter`select used from paginated_collections.rate_windows where subject = ${`key:${keyId}`}`;
  t.equal(Number(window?.used), 25, 'the window on the limiter database holds exactly what was served');
});

t.test("the service's whole state is on the limiter database, the data database holds only what is served", async (t) => {
  const schemas = async (sql: Sql) =>
    (await sql`select nspname from pg_namespace where nspname in ('paginated_collections', 'drizzle', 'demo') order by 1`).map(
      (row) => row.nspname,
    );
  t.same(await schemas(onData), ['demo'], "the data database: the demo's schema, nothing of the service's");
  t.same(await schemas(onLimiter), ['paginated_collections'], "the limiter database: the service's schema, no demo");
  const count = async (sql: Sql, query: string) => Number((await sql.unsafe(query))[0]!.n);
  t.equal(await count(onLimiter, `select count(*) as n from paginated_collections.api_keys where id = '${keyId}'`), 1, 'the key');
  t.equal(await count(onLimiter, `select count(*) as n from paginated_collections.rate_tiers where name = 'tiny'`), 1, 'the tier');
  t.same(
    (await onLimiter`select subject from paginated_collections.rate_windows order by subject`).map((row) => row.subject),
    [`key:${keyId}`, 'reg:127.0.0.1'],
    'the windows',
  );
  t.equal(
    await count(onLimiter, `select count(*) as n from paginated_collections.settings where name = 'cursor_secret'`),
    1,
    'the cursor secret',
  );
  t.equal(await count(onData, 'select count(*) as n from demo.products'), 100, 'the collections: data');
  t.equal(
    await count(
      onLimiter,
      `select count(*) as n from pg_proc where proname in ('rate_decide', 'rate_release', 'rate_refund', 'rate_housekeep')`,
    ),
    4,
    'the functions',
  );
  t.equal(await count(onData, `select count(*) as n from pg_proc where proname like 'rate\\_%'`), 0, 'no function on the data database');
});

t.test('a revoked key is refused by every instance at once', async (t) => {
  t.equal((await admin(servers[0]!, 'DELETE', `/keys/${keyId}`)).status, 204);
  for (const server of servers) {
    const res = await fetch(`${server.url}/v1/orders`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(res.status, 401, server.url);
  }
});

/** Polls `path` at every server until each answers 200; the time from `since` to the last first 200. */
async function firstServed(path: string, since: number): Promise<number> {
  const served = new Set<ServerProcess>();
  let last = 0;
  await waitFor(
    `a 200 of ${path} at every instance`,
    async () => {
      await Promise.all(
        servers
          .filter((server) => !served.has(server))
          .map(async (server) => {
            const res = await fetch(`${server.url}${path}`).catch(() => undefined);
            await res?.arrayBuffer();
            if (res?.status === 200) {
              served.add(server);
              last = performance.now() - since;
            }
          }),
      );
      return served.size;
    },
    { until: (n) => n === servers.length, timeoutMs: 20_000, intervalMs: 20 },
  );
  return last;
}

/** One request of `path` at each server: statuses, Retry-After, the slowest in ms. */
async function probe(path: string): Promise<{ statuses: number[]; retryAfter: (string | null)[]; slowest: number }> {
  const answers = await Promise.all(
    servers.map(async (server) => {
      const started = performance.now();
      const res = await fetch(`${server.url}${path}`);
      await res.arrayBuffer();
      return { status: res.status, retryAfter: res.headers.get('retry-after'), ms: performance.now() - started };
    }),
  );
  return {
    statuses: answers.map((a) => a.status),
    retryAfter: answers.map((a) => a.retryAfter),
    slowest: Math.max(...answers.map((a) => a.ms)),
  };
}

t.test('the limiter database away: every /v1 request is a quick 503, served again once it is back', async (t) => {
  await firstServed('/v1/products?count=none', performance.now());
  await limiterDb.stop();
  for (const path of ['/v1', '/v1/products?count=none']) {
    const down = await probe(path);
    t.same(down.statuses, [503, 503, 503], `${path}: 503`);
    t.same(down.retryAfter, ['1', '1', '1'], `${path}: Retry-After`);
    t.ok(down.slowest < 3000, `${path}: quick (${Math.round(down.slowest)} ms)`);
  }
  t.same((await probe('/readyz')).statuses, [503, 503, 503], '/readyz: 503');
  await sleep(500);
  await limiterDb.start();
  const back = await firstServed('/v1/products?count=none', performance.now());
  t.ok(back < 1000, `the first 200 at every instance within 1 s of the database accepting connections (${Math.round(back)} ms)`);
});

t.test('the data database away: collections are a quick 503, the limiter goes on deciding', async (t) => {
  await data.stop();
  const down = await probe('/v1/products?count=none');
  t.same(down.statuses, [503, 503, 503], 'a collection: 503');
  t.same(down.retryAfter, ['1', '1', '1'], 'with Retry-After');
  t.ok(down.slowest < 3000, `quick (${Math.round(down.slowest)} ms)`);
  t.same((await probe('/v1')).statuses, [200, 200, 200], 'the index, which needs the limiter only, is served');
  t.same((await probe('/readyz')).statuses, [200, 200, 200], '/readyz asks the limiter database');
  await sleep(500);
  await data.start();
  const back = await firstServed('/v1/products?count=none', performance.now());
  t.ok(back < 1000, `the first 200 at every instance within 1 s of the database accepting connections (${Math.round(back)} ms)`);
});
