// GET /metrics: Prometheus text behind the admin token, scraped and parsed with a Prometheus text parser;
// every metric the service promises (docs/reference/metrics.md) is there and counts what happened.
import parsePrometheusTextFormat, { type Family } from 'parse-prometheus-text-format';
import postgres from 'postgres';
import t from 'tap';
import { openDatabase } from '../../db/client.ts';
import { demoRegistry } from '../../demo/collections.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { ADMIN_TOKEN, type TestApp, testApp } from '../helpers/app.ts';
import { lockWaiters } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { freePort } from '../helpers/processes.ts';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

async function scrape(request: (path: string, init?: RequestInit) => Promise<Response>): Promise<Map<string, Family>> {
  const res = await request('/metrics', { headers: admin });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${await res.text()}`);
  if (!res.headers.get('content-type')?.startsWith('text/plain; version=0.0.4')) throw new Error('not the Prometheus text format');
  return new Map(parsePrometheusTextFormat(await res.text()).map((family) => [family.name, family]));
}

/** The value of the sample of `name` whose labels include `labels`; 0 when there is none. */
function value(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const family = families.get(name);
  if (!family) throw new Error(`No metric ${name}`);
  const sample = family.metrics.find((metric) => Object.entries(labels).every(([key, v]) => metric.labels?.[key] === v));
  return Number(sample?.value ?? 0);
}

t.test('without ADMIN_TOKEN there is no /metrics: 404', async (t) => {
  const api = await testApp(t, { env: { ADMIN_TOKEN: '' }, rateLimit: true });
  t.equal((await api.request('/metrics')).status, 404);
  t.equal((await api.request('/metrics', { headers: admin })).status, 404);
});

t.test('behind the admin token: 401 without it, 403 with another, problem+json', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  for (const [headers, status] of [
    [{}, 401],
    [{ authorization: 'Bearer not-the-admin-token-at-all' }, 403],
    [{ authorization: 'Basic YWRtaW46YWRtaW4=' }, 403],
  ] as const) {
    const res = await api.request('/metrics', { headers });
    t.equal(res.status, status, JSON.stringify(headers));
    t.equal(res.headers.get('content-type'), 'application/problem+json');
  }
  t.equal((await api.request('/metrics', { method: 'POST', headers: admin })).status, 405);
  t.equal((await api.request('/metrics', { headers: admin })).status, 200);
});

t.test('requests, latency, limiter decisions and statements, pool, process: counted as they happen', async (t) => {
  const api: TestApp = await testApp(t, { seed: { products: 30 }, rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 3, windowSeconds: 60, concurrency: 50 });
  for (let i = 0; i < 3; i++) t.equal((await api.request('/v1/products?limit=2&count=none')).status, 200);
  t.equal((await api.request('/v1/products?limit=2')).status, 429, 'the allowance is spent');
  t.equal((await api.request('/v1/products?limit=500', { address: '192.0.2.2' })).status, 400);
  t.equal((await api.request('/v1', { address: '192.0.2.2', headers: { authorization: 'Bearer pck_wrong' } })).status, 401);

  let m = await scrape(api.request);
  t.equal(m.get('http_requests_total')?.type, 'COUNTER');
  t.equal(value(m, 'http_requests_total', { route: '/v1/:collection', method: 'GET', status: '200' }), 3);
  t.equal(value(m, 'http_requests_total', { route: '/v1/:collection', method: 'GET', status: '400' }), 1);
  // A collection request the limiter declines is answered by its route's handler, which admits it; any other
  // request under /v1 the limiter answers never reaches its route: it is counted under the middleware's route.
  t.equal(value(m, 'http_requests_total', { route: '/v1/:collection', method: 'GET', status: '429' }), 1);
  t.equal(value(m, 'http_requests_total', { route: '/v1/*', method: 'GET', status: '401' }), 1);
  const latency = m.get('http_request_duration_seconds');
  t.equal(latency?.type, 'HISTOGRAM');
  // This parser folds a labelled histogram into one sample of buckets (it drops the labels, _count and
  // _sum); the buckets it keeps are those of the last route, /v1/* here.
  t.ok(latency?.metrics[0]?.buckets?.['+Inf'], 'latency buckets up to +Inf');

  t.equal(value(m, 'ratelimit_decisions_total', { outcome: 'ok' }), 4, '3 served, and the 400 (charged)');
  t.equal(value(m, 'ratelimit_decisions_total', { outcome: 'rate' }), 1);
  t.equal(value(m, 'ratelimit_decisions_total', { outcome: 'invalid_key' }), 1);
  const decisionLatency = m.get('ratelimit_decision_duration_seconds')!.metrics[0]!;
  t.equal(Number(decisionLatency.count), 6, 'every decision timed');
  t.ok(Number(decisionLatency.sum) > 0 && Number(decisionLatency.sum) < 6 * 2.5, `their time: ${decisionLatency.sum} s`);
  const statements = m.get('ratelimit_statement_requests')!.metrics[0]!;
  t.ok(Number(statements.count) >= 6, `statements sent: ${statements.count} (decisions and releases)`);
  t.equal(Number(statements.sum), 6, 'each decision went in exactly one statement');

  for (const name of [
    'process_cpu_user_seconds_total',
    'process_resident_memory_bytes',
    'nodejs_eventloop_lag_seconds',
    'nodejs_heap_size_used_bytes',
  ]) {
    t.ok(m.has(name), `process default ${name}`);
  }
  t.ok(value(m, 'process_resident_memory_bytes') > 10_000_000, 'a real process');

  // The app's pool (4 connections in tests): six requests behind a lock hold all four, and two queries
  // wait. The lock and the watching go through a client of the test's own, outside that pool. An allowance
  // whose share gives each request a budget of PostgreSQL time far past its floor: on a busy machine a chunk
  // sent once the lock is gone may take tens of milliseconds by the server's clock, and its budget is not what
  // this test is about (tests/ratelimit/real-cost.test.ts is).
  await setTier(api.database.sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 60, concurrency: 50 });
  const own = postgres(api.database.url, { max: 2, onnotice: () => {} });
  t.teardown(() => own.end());
  const reserved = await own.reserve();
  await reserved`begin`;
  await reserved`lock table demo.products in access exclusive mode`;
  t.equal(value(await scrape(api.request), 'db_pool_connections', { pool: 'primary', state: 'in_use' }), 0, 'an idle pool');
  const held = Array.from({ length: 6 }, (_, i) =>
    api.request(`/v1/products?limit=1&count=none&offset=${i}`, { address: `198.51.100.${i}` }),
  );
  await lockWaiters(own, api.database.name, 4);
  m = await scrape(api.request);
  t.equal(value(m, 'db_pool_connections', { pool: 'primary', state: 'in_use' }), 4, 'every connection of the pool in use');
  t.equal(value(m, 'db_pool_queries_waiting', { pool: 'primary' }), 2, 'two queries wait for one');
  await reserved`commit`;
  reserved.release();
  for (const res of await Promise.all(held)) t.equal(res.status, 200);
  m = await scrape(api.request);
  t.equal(value(m, 'db_pool_queries_waiting', { pool: 'primary' }), 0, 'none waits once they are served');
  t.equal(value(m, 'db_pool_connections', { pool: 'primary', state: 'in_use' }), 0);
});

t.test('503s by cause: the limiter, a query, readiness, draining', async (t) => {
  const api = await testApp(t, { seed: { products: 5 }, rateLimit: true });
  const reserved = await api.database.sql.reserve();
  t.teardown(() => reserved.release());
  await reserved`begin`;
  await reserved`lock table demo.products in access exclusive mode`;
  const answer = api.request('/v1/products?limit=1&count=none');
  await lockWaiters(api.database.sql, api.database.name, 1);
  await api.database.sql`
    select pg_cancel_backend(pid) from pg_stat_activity where datname = ${api.database.name} and wait_event_type = 'Lock'`;
  t.equal((await answer).status, 503);
  await reserved`rollback`;
  t.equal(value(await scrape(api.request), 'http_unavailable_total', { cause: 'query' }), 1, 'a cancelled query');

  // An instance whose database refuses connections: no decision, and not ready.
  const away = openDatabase(`postgres://postgres@127.0.0.1:${await freePort()}/none`, { max: 1 });
  t.teardown(() => away.close());
  const config = parseConfig({ ADMIN_TOKEN });
  let draining = false;
  const app = buildApp({
    database: away,
    config,
    registry: demoRegistry(),
    cursorSecret: 'x'.repeat(32),
    rateLimit: { housekeepingMs: 0 },
    remoteAddress: () => '192.0.2.9',
    draining: () => draining,
  });
  const request = async (path: string, init?: RequestInit) => app.request(`http://test.local${path}`, init);
  t.equal((await request('/v1/products')).status, 503);
  t.equal((await request('/readyz')).status, 503);
  draining = true;
  const drained = await request('/readyz');
  t.equal(drained.status, 503);
  t.match(await drained.json(), { code: 'unavailable', detail: 'The instance is shutting down' });
  t.equal((await request('/healthz')).status, 200, '/healthz stays 200 while draining');
  const m = await scrape(request);
  t.same(
    ['limiter', 'query', 'readiness', 'draining'].map((cause) => value(m, 'http_unavailable_total', { cause })),
    [1, 0, 1, 1],
  );
});
