// PostgreSQL restarted, or the service's backends killed, under load: the service serves again within 1 s of the database accepting connections.
// On a private cluster (tests/helpers/cluster.ts); the shared test server is never touched.
import pg from 'pg';
import t, { type Test } from 'tap';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { withSession } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

// What the issue demands: the first 200 within 1 s of the database accepting connections again.
const RECOVERY_MS = 1000;
// Far more clients than the pool has connections, each in a loop with no pause: the pool and the
// limiter's connection always have statements queued, so a connection that closes usually has a write
// pending or is handed more before its close is seen (the cases the postgres.js patch fixes).
const DATA_ROUTES = ['/v1/products', '/v1/products?sort=-priceCents', '/v1/products?count=none', '/v1/products?name[prefix]=B'];
const ROUTES = [...Array.from({ length: 48 }, (_, i) => DATA_ROUTES[i % DATA_ROUTES.length]!), '/readyz', '/readyz'];

interface Sample {
  /** Which client loop sent it. */
  readonly client: number;
  readonly route: string;
  readonly started: number;
  readonly ended: number;
  /** 0: the connection failed or was dropped (no response). */
  readonly status: number;
  /** The problem's detail, or the error, when not a 200: for failure messages. */
  readonly detail?: string;
}

interface Probe {
  readonly started: number;
  readonly ended: number;
  readonly ok: boolean;
}

/**
 * One fresh connection and `select 1`: whether the database accepts connections now. node-postgres, so
 * that the measure does not depend on the driver under test.
 */
async function accepts(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A short admin statement on a connection of its own (a crash takes every connection down). */
async function admin<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

const cluster: Cluster = await startCluster(t);
const url = cluster.url();
await runMigrations(url);
await migrateDemo(url);
{
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`update paginated_collections.rate_tiers set allowance = 1000000, concurrency = 1000 where name = 'anonymous'`);
  await client.end();
  await withSession(url, async (sql) => {
    await seedTable(sql, 'products', 2_000);
    await seedTable(sql, 'orders', 10);
    await seedTable(sql, 'events', 10);
  });
}
const server: ServerProcess = await startServer(t, await freePort(), { DATABASE_URL: url });

const samples: Sample[] = [];
const probes: Probe[] = [];
let running = true;

async function client(route: string, client: number): Promise<void> {
  while (running) {
    const started = performance.now();
    let status = 0;
    let detail: string | undefined;
    try {
      const res = await fetch(`${server.url}${route}`, { signal: AbortSignal.timeout(30_000) });
      const body = await res.text();
      status = res.status;
      if (status !== 200) detail = body.slice(0, 200);
    } catch (error) {
      detail = String(error);
    }
    samples.push({ client, route, started, ended: performance.now(), status, detail });
  }
}

async function probeLoop(): Promise<void> {
  while (running) {
    const started = performance.now();
    const ok = await accepts(url);
    probes.push({ started, ended: performance.now(), ok });
    await sleep(20);
  }
}

const load = [...ROUTES.map(client), probeLoop()];
t.teardown(async () => {
  running = false;
  await Promise.all(load);
});

/** Waits until every route has answered 200 on a request started after `since`. */
async function allServedSince(what: string, since: number, timeoutMs: number): Promise<void> {
  const unserved = () => {
    const served = new Set(samples.filter((s) => s.started >= since && s.status === 200).map((s) => s.route));
    return [...new Set(ROUTES)].filter((route) => !served.has(route));
  };
  await waitFor(what, unserved, { until: (routes) => routes.length === 0, timeoutMs, intervalMs: 20 });
}

interface Outage {
  /** From the fault to the database accepting connections again. */
  readonly databaseAwayMs: number;
  /** The slowest route: from the database accepting connections to its first 200. */
  readonly firstOkMs: number;
  readonly statuses: Record<number, number>;
}

interface Measured {
  readonly outage: Outage;
  /** Per route: from the database accepting connections to the first 200 (Infinity: none). */
  readonly firstOkMs: Record<string, number>;
  /** The route served last, and its requests around the recovery (see measure). */
  readonly slowest: { readonly route: string; readonly requests: string[] };
  /** Every request sent from the fault to the end of the watch. */
  readonly during: Sample[];
  /** The requests sent once the service must be serving again. */
  readonly after: Sample[];
}

/**
 * Injects a fault under load and measures. The database accepts connections again at the end of the first
 * successful probe after the last failed one; when no probe failed (it went on accepting), at the end of
 * the injection. Then waits for every route's first 200, and watches one more second of traffic from the
 * later of that and 1 s after the database accepted connections.
 */
async function measure(t: Test, name: string, inject: () => Promise<void>): Promise<Measured> {
  await allServedSince(`${name}: every route served before the fault`, performance.now(), 10_000);
  const faultAt = performance.now();
  await inject();
  const injected = performance.now();
  // Up to 40 s: long enough to measure the outage of an unpatched driver, which is not a pass.
  const deadline = performance.now() + 40_000;
  const accepted = () => {
    const since = probes.filter((p) => p.started >= faultAt);
    const lastFailure = since.map((p) => p.ok).lastIndexOf(false);
    if (lastFailure === -1) return since.some((p) => p.ok && p.started >= injected) ? injected : undefined;
    return since.slice(lastFailure + 1).find((p) => p.ok)?.ended;
  };
  const acceptedAt = await waitFor(`${name}: the database to accept connections again`, accepted, {
    until: (at) => at !== undefined,
    timeoutMs: 40_000,
    intervalMs: 20,
  });
  await allServedSince(`${name}: every route to answer 200 again`, faultAt, Math.max(deadline - performance.now(), 0));
  const servingFrom = Math.max(performance.now(), acceptedAt + RECOVERY_MS);
  await sleep(servingFrom + 1_000 - performance.now());
  // Each client has one request out at a time: once each has sent one after the watch, every request
  // sent before has been answered (or failed).
  const watchedUntil = performance.now();
  const waiting = () => ROUTES.filter((_, i) => !samples.some((s) => s.client === i && s.started >= watchedUntil)).length;
  // A request times out after 30 s: by 40 s every client has sent another.
  await waitFor(`${name}: every client to send a request after the watch`, waiting, {
    until: (n) => n === 0,
    timeoutMs: 40_000,
    intervalMs: 20,
  });

  const during = samples.filter((s) => s.started >= faultAt && s.started < watchedUntil);
  const firstOk: Record<string, Sample | undefined> = {};
  for (const route of new Set(ROUTES)) {
    firstOk[route] = during.find((s) => s.route === route && s.status === 200 && s.ended >= acceptedAt);
  }
  const firstOkMs: Record<string, number> = Object.fromEntries(
    Object.entries(firstOk).map(([route, first]) => [route, first ? Math.round(first.ended - acceptedAt) : Number.POSITIVE_INFINITY]),
  );
  // For a failure's diagnosis: the slowest route's requests that ended from 200 ms before the database was
  // back to its first 200, as "client: start + duration = status", times in ms from the database's return.
  const slowestRoute = Object.keys(firstOkMs).reduce((a, b) => (firstOkMs[a]! >= firstOkMs[b]! ? a : b));
  const around = during
    .filter((s) => s.route === slowestRoute && s.ended >= acceptedAt - 200 && s.started <= (firstOk[slowestRoute]?.ended ?? watchedUntil))
    .slice(0, 40)
    .map((s) => `${s.client}: ${Math.round(s.started - acceptedAt)} + ${Math.round(s.ended - s.started)} = ${s.status}`);
  const statuses: Record<number, number> = {};
  for (const s of during) statuses[s.status] = (statuses[s.status] ?? 0) + 1;
  const outage = { databaseAwayMs: Math.round(acceptedAt - faultAt), firstOkMs: Math.max(...Object.values(firstOkMs)), statuses };
  t.comment(`${name}: ${JSON.stringify(outage)}`);
  return {
    outage,
    firstOkMs,
    slowest: { route: slowestRoute, requests: around },
    during,
    after: during.filter((s) => s.started >= servingFrom),
  };
}

/** What every fault must show: served again within 1 s, nothing but 200 and 503 meanwhile, steady after. */
function check(t: Test, name: string, { firstOkMs, slowest, during, after, outage }: Measured): void {
  for (const [route, ms] of Object.entries(firstOkMs)) {
    // A failure of the slowest route says what its requests were doing (the reporter shows the message only).
    const requests = ms > RECOVERY_MS && route === slowest.route ? `; its requests: ${slowest.requests.join(', ')}` : '';
    t.ok(ms <= RECOVERY_MS, `${name}: ${route} first 200 ${ms} ms after the database accepts connections${requests}`);
  }
  t.same(
    during.filter((s) => s.status !== 200 && s.status !== 503).map((s) => `${s.route} ${s.status} ${s.detail}`),
    [],
    `${name}: no 500 and no dropped connection, only 200 and 503 (${JSON.stringify(outage.statuses)})`,
  );
  t.ok(after.length > 10, `${name}: traffic watched once it must be served (${after.length} requests)`);
  t.same(
    after.filter((s) => s.status !== 200).map((s) => `${s.route} ${s.status} ${s.detail}`),
    [],
    `${name}: from 1 s after the database accepts connections, every request is a 200`,
  );
  t.equal(server.child.exitCode, null, `${name}: the server is still running`);
}

/**
 * The driver bug strikes when a connection closes while a write of its is still queued for the next
 * turn of the event loop: a matter of timing, so each fault is injected several times.
 */
const ROUNDS = 3;

async function repeatFault(t: Test, name: string, inject: (t: Test) => Promise<void>): Promise<void> {
  const outages: Outage[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const measured = await measure(t, `${name} #${round}`, () => inject(t));
    check(t, `${name} #${round}`, measured);
    outages.push(measured.outage);
  }
  const worst = (key: 'databaseAwayMs' | 'firstOkMs') => Math.max(...outages.map((o) => o[key]));
  t.comment(
    `${name}: database away up to ${worst('databaseAwayMs')} ms; first 200 up to ${worst('firstOkMs')} ms after it accepted connections`,
  );
}

/** The service's backends: its pool ('collections') and the limiter's connection ('collections-limiter'). */
const SERVICE_BACKENDS = `select pid from pg_stat_activity where application_name in ('collections', 'collections-limiter')`;

t.test('pg_ctl restart -m fast under load', (t) => repeatFault(t, 'restart -m fast', () => cluster.restart('fast')));

t.test('pg_ctl restart -m immediate under load (crash recovery at start)', (t) =>
  repeatFault(t, 'restart -m immediate', () => cluster.restart('immediate')),
);

t.test('pg_terminate_backend of every backend of the service under load', (t) =>
  repeatFault(t, 'pg_terminate_backend', async (t) => {
    const rows = await admin<{ terminated: boolean }>(url, `select pg_terminate_backend(pid) as terminated from (${SERVICE_BACKENDS}) s`);
    t.ok(rows.length >= 2, `${rows.length} backends of the service (pool and limiter)`);
    t.same(
      rows.filter((row) => !row.terminated),
      [],
      'each terminated',
    );
  }),
);

t.test('a backend killed with SIGKILL under load: the postmaster restarts every backend', (t) =>
  repeatFault(t, 'backend SIGKILL', async (t) => {
    const [row] = await admin<{ pid: number }>(url, SERVICE_BACKENDS);
    t.ok(row, 'the service has a backend');
    const logged = (await cluster.log()).length;
    process.kill(row!.pid, 'SIGKILL');
    // Returns once the postmaster has acted on the crash (every backend gone), so that a probe that got
    // in just before cannot pass for the database being back.
    await waitFor('the postmaster to reinitialise', async () => (await cluster.log()).slice(logged), {
      until: (log) => /all server processes terminated; reinitializing/.test(log),
      timeoutMs: 10_000,
      intervalMs: 5,
    });
  }),
);
