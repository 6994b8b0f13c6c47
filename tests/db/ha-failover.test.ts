// A real HA pair: a pg_auto_failover formation from Debian's packages (a monitor, a primary and a secondary:
// tests/helpers/formation.ts), the service's two instances on the formation's URL (both hosts,
// target_session_attrs=read-write), one with LIMITER_SYNCHRONOUS_COMMIT=on and one with the default, under bounded
// load. A switchover each way (pg_autoctl perform failover) and the primary's postmaster killed (pg_autoctl restarts
// it): no 500 and no dropped request at any point, 503s only from the fault until the new primary takes writes and
// none from 2 s after it, every instance on the new primary with no restart, and the limiter's over-admission
// within what docs/explanation/rate-limit.md ("Asynchronous commit") says: none with synchronous commit, and by
// default at most the units admitted in the 600 ms (3 × wal_writer_delay) before the primary stopped and by it as it
// went away.
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import pg from 'pg';
import postgres from 'postgres';
import t, { type Test } from 'tap';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { type FormationNode, startFormation } from '../helpers/formation.ts';
import { freePort } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

/** From the new primary taking writes, how long a 503 may still be answered. */
const SETTLE_MS = 2000;
/** The limiter's statement deadline (LimiterOptions.timeoutMs, 2500 ms by default). */
const LIMITER_TIMEOUT_MS = 2500;
/** 3 × wal_writer_delay (200 ms): the most an asynchronous commit waits for its flush. */
const ASYNC_WINDOW_MS = 600;
/** Each phase's keys: admitted this many units before the fault, of an allowance that runs out a few seconds after it. */
const BEFORE_FAULT = 100;
const ALLOWANCE = 400;

const started = performance.now();
const formation = await startFormation(t);
const url = formation.url();
await runMigrations(url);
await migrateDemo(url);
{
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  await seedTable(sql, 'products', 200);
  await seedTable(sql, 'orders', 10);
  await seedTable(sql, 'events', 10);
  await sql.end();
}
t.comment(`formation formed and migrated in ${Math.round(performance.now() - started)} ms`);

type Instance = 'sync' | 'async';
const INSTANCES: readonly Instance[] = ['sync', 'async'];
const [syncServer, asyncServer] = await Promise.all([
  startServer(t, await freePort(), { DATABASE_URL: url, ADMIN_TOKEN, LIMITER_SYNCHRONOUS_COMMIT: 'on' }),
  startServer(t, await freePort(), { DATABASE_URL: url, ADMIN_TOKEN }),
]);
const servers: Record<Instance, ServerProcess> = { sync: syncServer!, async: asyncServer! };

async function adminCall(method: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${servers.async.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

async function issueKey(tier: string): Promise<{ id: string; key: string }> {
  const issued = await adminCall('POST', '/admin/keys', { tier });
  return { id: issued.id as string, key: issued.key as string };
}

await adminCall('PUT', '/admin/tiers/unlimited', { limit: 1_000_000_000, windowSeconds: 3600, concurrency: 1000 });
const readKeys: Record<Instance, string> = { sync: (await issueKey('unlimited')).key, async: (await issueKey('unlimited')).key };

interface Sample {
  readonly instance: Instance;
  /** `read`: a collection's chunk (the limiter and the data pool); `limit`: GET /v1 with the phase's key (the limiter only). */
  readonly kind: 'read' | 'limit';
  readonly key: string;
  readonly started: number;
  readonly ended: number;
  /** 0: no response (the connection failed or was dropped). */
  readonly status: number;
  readonly code?: string;
}

interface Probe {
  readonly node: FormationNode;
  readonly at: number;
  readonly writable: boolean;
  /** A standby streams from it: what a synchronous commit waits for (pg_auto_failover names its standby synchronous). */
  readonly streaming: boolean;
}

const samples: Sample[] = [];
/** When each request in flight began. */
const inFlight = new Set<{ readonly started: number }>();
const probes: Probe[] = [];
/** The key each instance's limit clients send, per phase; undefined between phases. */
const limitKeys: Record<Instance, string | undefined> = { sync: undefined, async: undefined };
let running = true;

async function send(instance: Instance, kind: Sample['kind'], key: string, path: string): Promise<void> {
  const begun = performance.now();
  const request = { started: begun };
  inFlight.add(request);
  let status = 0;
  let code: string | undefined;
  try {
    const res = await fetch(`${servers[instance].url}${path}`, {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(20_000),
    });
    const body = await res.text();
    status = res.status;
    if (status !== 200) code = (JSON.parse(body) as { code?: string }).code;
  } catch (error) {
    code = String(error);
  }
  samples.push({ instance, kind, key, started: begun, ended: performance.now(), status, code });
  inFlight.delete(request);
}

// Bounded load: per instance, two clients reading a chunk every 20 ms and three sending GET /v1 with the phase's key
// every 5 ms, each with one request out at a time.
const load = INSTANCES.flatMap((instance) => [
  ...[0, 1].map(async () => {
    while (running) {
      await send(instance, 'read', readKeys[instance], '/v1/products?limit=5&sort=-priceCents');
      await sleep(20);
    }
  }),
  ...[0, 1, 2].map(async () => {
    while (running) {
      const key = limitKeys[instance];
      if (key !== undefined) await send(instance, 'limit', key, '/v1');
      await sleep(5);
    }
  }),
]);

/** Whether each node takes writes, every 50 ms, on connections of its own (node-postgres, not the driver under test). */
async function probeLoop(node: FormationNode): Promise<void> {
  while (running) {
    const client = new pg.Client({ connectionString: formation.nodeUrl(node), connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    let writable = false;
    let streaming = false;
    try {
      await client.connect();
      const { rows } = await client.query<{ writable: boolean; streaming: boolean }>(
        `select not pg_is_in_recovery() and current_setting('transaction_read_only') = 'off' as writable,
          exists (select from pg_stat_replication where state = 'streaming') as streaming`,
      );
      writable = rows[0]!.writable;
      streaming = rows[0]!.streaming;
    } catch {
      writable = false;
    } finally {
      await client.end().catch(() => {});
    }
    // Taken at its answer, not its start: a probe that waited for a node still recovering (up to the connect
    // timeout) and then found it writable says so only once it answered.
    probes.push({ node, at: performance.now(), writable, streaming });
    await sleep(50);
  }
}
const probing = formation.nodes.map(probeLoop);

t.teardown(async () => {
  running = false;
  await Promise.all([...load, ...probing]);
});

/** The servers each instance's pools and limiter connection are open to, from /metrics. */
async function serversOf(instance: Instance): Promise<Record<string, string[]>> {
  const res = await fetch(`${servers[instance].url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const family = parsePrometheusTextFormat(await res.text()).find((each) => each.name === 'db_server_connections');
  const open: Record<string, string[]> = {};
  for (const metric of family?.metrics ?? []) {
    if (Number(metric.value) === 0) continue;
    const pool = metric.labels!.pool!;
    open[pool] = [...(open[pool] ?? []), metric.labels!.server!];
  }
  return open;
}

/** The units a key's row holds on the primary: what the limiter counts of it now. */
async function recordedUnits(primary: FormationNode, keyId: string): Promise<number> {
  const client = new pg.Client({ connectionString: formation.nodeUrl(primary) });
  await client.connect();
  try {
    const { rows } = await client.query<{ units: number }>(
      `select coalesce((select sum(u)::int from unnest(units) u), 0) as units from paginated_collections.rate_windows where subject = $1`,
      [`key:${keyId}`],
    );
    return rows[0]?.units ?? 0;
  } finally {
    await client.end();
  }
}

interface Figures {
  readonly faultToWritesMs: number;
  readonly unavailable: { readonly first?: number; readonly last?: number; readonly count: number };
  readonly overAdmitted: Record<Instance, number>;
  readonly lost: Record<Instance, number>;
  readonly bound: Record<Instance, number>;
}

const figures: Record<string, Figures> = {};

async function phase(t: Test, name: string, inject: (primary: FormationNode) => Promise<void>): Promise<void> {
  const before = await formation.settled();
  // A tier of its own, so that each phase's keys start afresh.
  const tier = `ha-${Object.keys(figures).length}`;
  await adminCall('PUT', `/admin/tiers/${tier}`, { limit: ALLOWANCE, windowSeconds: 3600, concurrency: 1000 });
  const keys = {} as Record<Instance, { id: string; key: string }>;
  for (const instance of INSTANCES) keys[instance] = await issueKey(tier);
  const phaseStart = performance.now();
  for (const instance of INSTANCES) limitKeys[instance] = keys[instance].key;
  const admitted = (instance: Instance) => samples.filter((s) => s.key === keys[instance].key && s.status === 200);
  await waitFor(`${name}: ${BEFORE_FAULT} admissions of each key before the fault`, () => INSTANCES.map((i) => admitted(i).length), {
    until: (counts) => counts.every((count) => count >= BEFORE_FAULT),
    timeoutMs: 30_000,
  });

  const faultAt = performance.now();
  await inject(before);
  const after = await formation.settled(90_000);
  // The new primary took writes at the first probe after which it always did.
  const ofAfter = probes.filter((p) => p.node === after && p.at >= faultAt);
  const lastRefusal = ofAfter.map((p) => p.writable).lastIndexOf(false);
  const writesAt = ofAfter.slice(lastRefusal + 1).find((p) => p.writable)?.at ?? faultAt;
  // A synchronous commit takes writes once its standby streams again: after a primary's crash and restart, a
  // decision sent before then waits for the standby, and holds the limiter's connection up to its statement
  // deadline (LIMITER_TIMEOUT_MS), which then answers what waited behind it 503 (docs/how-to/ha-pair.md).
  const syncWritesAt =
    Math.max(writesAt, ofAfter.slice(lastRefusal + 1).find((p) => p.writable && p.streaming)?.at ?? writesAt) + LIMITER_TIMEOUT_MS;
  const takesWrites = (instance: Instance) => (instance === 'sync' ? syncWritesAt : writesAt);
  // Every key runs out of its allowance, and traffic is watched for a second from 2 s after the new primary took writes.
  const exhausted = (instance: Instance) => samples.some((s) => s.key === keys[instance].key && s.code === 'Request_limit_exceeded');
  await waitFor(`${name}: each key to run out of its allowance`, () => INSTANCES.every(exhausted), { timeoutMs: 60_000 });
  await sleep(writesAt + SETTLE_MS + 1000 - performance.now());
  const watchedUntil = performance.now();
  for (const instance of INSTANCES) limitKeys[instance] = undefined;
  await waitFor(
    `${name}: the requests sent before the watch ended to be answered`,
    () => [...inFlight].some((r) => r.started < watchedUntil),
    {
      until: (waiting) => !waiting,
      timeoutMs: 30_000,
    },
  );
  const during = samples.filter((s) => s.started >= phaseStart && s.started < watchedUntil);

  t.same(
    during.filter((s) => !(s.status === 200 || s.status === 503 || (s.kind === 'limit' && s.code === 'Request_limit_exceeded'))),
    [],
    `${name}: no 500, no dropped request: only 200, 503 and (a key out of its allowance) 429`,
  );
  const unavailable = during.filter((s) => s.status === 503);
  t.same(
    unavailable.filter((s) => s.started < faultAt).map((s) => `${s.instance} ${s.kind} ${s.code}`),
    [],
    `${name}: no 503 before the fault`,
  );
  t.same(
    unavailable
      .filter((s) => s.started >= takesWrites(s.instance) + SETTLE_MS)
      .map((s) => `${s.instance} ${s.kind} +${Math.round(s.started - takesWrites(s.instance))} ms ${s.code}`),
    [],
    `${name}: no 503 from ${SETTLE_MS} ms after the new primary took writes (with synchronous commit, after its standby streams and the limiter's deadline)`,
  );
  t.ok(during.filter((s) => s.started >= writesAt + SETTLE_MS).length > 20, `${name}: traffic watched from then on`);

  for (const instance of INSTANCES) {
    const open = await waitFor(`${name}: the ${instance} instance on the new primary`, () => serversOf(instance), {
      until: (open) => open.primary?.join() === after.host && open.limiter?.join() === after.host,
      timeoutMs: 5000,
    }).catch((error: Error) => error.message);
    t.same(
      open,
      { primary: [after.host], limiter: [after.host] },
      `${name}: the ${instance} instance's pool and limiter on ${after.name}, with no restart`,
    );
    t.equal(servers[instance].child.exitCode, null, `${name}: the ${instance} instance still runs`);
  }

  const overAdmitted = {} as Record<Instance, number>;
  const lost = {} as Record<Instance, number>;
  const bound = {} as Record<Instance, number>;
  for (const instance of INSTANCES) {
    const ok = admitted(instance);
    overAdmitted[instance] = ok.length - ALLOWANCE;
    lost[instance] = ok.length - (await recordedUnits(after, keys[instance].id));
    // What the docs bound it by: the units admitted in the 600 ms before the fault, and by the old primary as it went.
    bound[instance] = ok.filter((s) => s.ended >= faultAt - ASYNC_WINDOW_MS && s.started < writesAt).length;
  }
  t.ok(overAdmitted.sync <= 0, `${name}: with LIMITER_SYNCHRONOUS_COMMIT=on, no admission over the allowance (${overAdmitted.sync})`);
  t.ok(
    overAdmitted.async <= bound.async,
    `${name}: by default, over-admitted ${overAdmitted.async}, within the units admitted in the ${ASYNC_WINDOW_MS} ms before the fault and as the old primary went (${bound.async})`,
  );
  const first = unavailable[0];
  const last = unavailable.at(-1);
  figures[name] = {
    faultToWritesMs: Math.round(writesAt - faultAt),
    unavailable: {
      ...(first === undefined ? {} : { first: Math.round(first.started - faultAt) }),
      ...(last === undefined ? {} : { last: Math.round(last.started - faultAt) }),
      count: unavailable.length,
    },
    overAdmitted,
    lost,
    bound,
  };
  t.comment(`${name} (${before.name} → ${after.name}): ${JSON.stringify(figures[name])}, ${during.length} requests`);
}

await t.test('a switchover: pg_autoctl perform failover', (t) => phase(t, 'switchover', () => formation.performFailover()));
await t.test('and back', (t) => phase(t, 'switchover back', () => formation.performFailover()));
await t.test("the primary's postmaster killed", (t) => phase(t, 'postmaster killed', (primary) => formation.killPostmaster(primary)));
t.comment(`formation, instances and the three faults in ${Math.round(performance.now() - started)} ms`);
