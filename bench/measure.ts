// One row of the table: a probe, a warm-up, then an autocannon run with the CPU each process spent on it.
import type { IncomingHttpHeaders } from 'node:http';
import autocannon from 'autocannon';
import type { Sql } from 'postgres';
import { waitFor } from '../tests/helpers/wait.ts';
import { cpuBetween, parentOf, snapshot, tcpPorts } from './cpu.ts';
import { vacuumMeasured } from './database.ts';
import type { RunningServer } from './processes.ts';
import type { Load, Scenario } from './scenario-types.ts';

export interface LoadOptions {
  connections: number;
  /** Seconds measured. */
  duration: number;
  /** Seconds of unmeasured traffic first: JIT, pool connections, caches. */
  warmup: number;
  /** Aborted on Ctrl-C: the load stops at once. */
  signal?: AbortSignal;
  /**
   * Seconds of a window of their own in which the allocations of servers started with the probe are
   * measured, after the measured seconds (0 or undefined: none). See `measureAllocations`.
   */
  allocSeconds?: number;
}

export interface Measurement {
  reqPerSec: number;
  /** Milliseconds, over all responses, to the microsecond (the percentiles are whole milliseconds). */
  meanMs: number;
  /** Milliseconds, over all responses. */
  p50: number;
  p99: number;
  responses: number;
  non2xx: number;
  /** Socket errors and timeouts. */
  errors: number;
  /**
   * CPU per response in microseconds: the server process, its PostgreSQL backends (children of the bench
   * cluster's postmaster serving its connections), the load generator (this process); undefined when not read.
   */
  serverCpu?: number;
  postgresCpu?: number;
  loadCpu: number;
  /** Whether the server keeps state in Redis (its variant's `redis`): Redis's CPU then belongs to the row. */
  redis: boolean;
  /** The whole redis-server process's CPU per response, when `redis` and that process is on this host. */
  redisCpu?: number;
  /** Bytes the server allocated per response (V8's sampling heap profiler), when they were measured. */
  allocBytes?: number;
}

/**
 * The PostgreSQL backends serving `serverPid`: client backends of the cluster whose postmaster is `postmaster`
 * (its children, postmasterOf in bench/cpu.ts), none when that cluster is not on this host (undefined), and of
 * those only the ones whose client port is one of that process's TCP connections, so that other processes on
 * the bench database (another bench, a test run) are not counted; backends on a Unix socket cannot be told
 * apart and all count. Parallel workers never do.
 */
export async function backendPids(sql: Sql, postmaster: number | undefined, serverPid: number): Promise<number[]> {
  if (postmaster === undefined) return [];
  const ports = tcpPorts(serverPid);
  const rows = await sql`
    select pid, client_port from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'`;
  return rows
    .filter((row) => row.client_port === null || row.client_port < 0 || ports.has(row.client_port as number))
    .map((row) => row.pid as number)
    .filter((pid) => parentOf(pid) === postmaster);
}

async function runAutocannon(
  origin: string,
  load: Load,
  options: LoadOptions,
  seconds: number,
  onResponse?: (milliseconds: number) => void,
): Promise<autocannon.Result> {
  options.signal?.throwIfAborted();
  // The callback form: the instance it returns can be stopped (the promise form's cannot, as typed).
  let instance: autocannon.Instance | undefined;
  const result = new Promise<autocannon.Result>((resolve, reject) => {
    instance = autocannon(
      {
        url: `${origin}${load.path ?? '/'}`,
        headers: load.headers,
        requests: load.requests,
        connections: options.connections,
        duration: seconds,
        timeout: 10,
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    );
    // Each response's time in fractional milliseconds (autocannon's percentiles are whole ones).
    if (onResponse) instance!.on('response', (_client, _status, _bytes, milliseconds) => onResponse(milliseconds));
  });
  const stop = () => instance?.stop();
  options.signal?.addEventListener('abort', stop, { once: true });
  try {
    return await result;
  } finally {
    options.signal?.removeEventListener('abort', stop);
  }
}

/**
 * Waits until the server answers its ready path quickly: autocannon stops at the deadline, but the server
 * still works through the requests it abandoned (a slow row leaves its whole pool busy), and the next row
 * must not pay for them. Gives up quietly after a minute; the probe then reports what is wrong.
 */
async function settle(server: RunningServer, quickMs = 200, patienceMs = 60_000): Promise<void> {
  const url = `${server.origin}${server.variant.readyPath}`;
  const quickAnswer = async () => {
    const started = performance.now();
    const ok = await fetch(url, { signal: AbortSignal.timeout(10_000) })
      .then(async (response) => {
        await response.arrayBuffer();
        return response.ok;
      })
      .catch(() => false);
    return ok && performance.now() - started < quickMs;
  };
  await waitFor(`${url} to answer within ${quickMs} ms`, quickAnswer, { timeoutMs: patienceMs, intervalMs: 500 }).catch(() => {});
}

/** Headers of an autocannon request as fetch takes them (a repeated header as one comma-joined value). */
function fetchHeaders(headers: IncomingHttpHeaders | undefined): Headers {
  const result = new Headers();
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value !== undefined) result.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  return result;
}

/** Sends one request as the scenario would and fails when the status is not the expected one. */
async function probe(origin: string, load: Load, expected: number): Promise<void> {
  // The first request as autocannon would send it: rewritten by its setupRequest, if it has one.
  const listed = load.requests?.[0];
  const setup = listed?.setupRequest;
  const first = listed && typeof setup === 'function' ? (setup({ ...listed }, {}) ?? listed) : listed;
  const path = first?.path ?? load.path ?? '/';
  const response = await fetch(`${origin}${path}`, { headers: fetchHeaders(first?.headers ?? load.headers) });
  const body = await response.text();
  if (response.status !== expected) {
    throw new Error(`Probe of ${path} answered ${response.status}, expected ${expected}: ${body.slice(0, 200)}`);
  }
}

/** Where the CPU of a row's processes beyond the server's own is read. */
export interface CpuSources {
  /** The postmaster of the bench database's cluster, when it is on this host (postmasterOf in bench/cpu.ts). */
  readonly postmaster: number | undefined;
  /** The redis-server process that servers with `redis` talk to, when it is on this host (bench/redis.ts). */
  readonly redisPid?: number | undefined;
}

/**
 * Bytes the server allocates per response, in a window of its own after the measured one: the sampling
 * profiler walks the stack at every sample (one per 4 KB allocated), which costs the service as much CPU per
 * chunk as the changes it is there to judge (docs/benchmarks.md, "Where the gap to the floor is"), so the
 * rows' CPU figures are read with it off. Requests in flight when the window opens or closes (at most one
 * per connection, of thousands) make its error; the server is settled first so that what the measured
 * window abandoned is not counted.
 */
async function measureAllocations(server: RunningServer, load: Load, run: LoadOptions): Promise<number | undefined> {
  if (!server.allocations || !run.allocSeconds) return undefined;
  await settle(server);
  const probe = server.allocations;
  await probe.start();
  const result = await runAutocannon(server.origin, load, run, run.allocSeconds).catch(async (error: unknown) => {
    await probe.stop().catch(() => {});
    throw error;
  });
  const bytes = await probe.stop();
  return result.requests.total > 0 ? bytes / result.requests.total : undefined;
}

export async function measure(
  scenario: Scenario,
  server: RunningServer,
  database: { sql: Sql } & CpuSources,
  options: LoadOptions,
): Promise<Measurement> {
  // What the row reads and writes is vacuumed and analysed first: dead rows left by earlier rows (or runs,
  // where autovacuum is off) would make this row pay for them.
  await vacuumMeasured(database.sql);
  await settle(server);
  const load: Load = { path: scenario.path, headers: scenario.headers, requests: scenario.requests };
  Object.assign(load, await scenario.setup?.({ origin: server.origin, sql: database.sql }));
  await probe(server.origin, load, scenario.expectStatus ?? 200);
  const run: LoadOptions = { ...options, connections: scenario.connections ?? options.connections };
  if (run.warmup > 0) await runAutocannon(server.origin, load, run, run.warmup);

  const redis = server.variant.redis === true;
  const redisPids = redis && database.redisPid !== undefined ? [database.redisPid] : [];
  const pidsBefore = [server.pid, ...(await backendPids(database.sql, database.postmaster, server.pid))];
  const before = snapshot(pidsBefore);
  const redisBefore = snapshot(redisPids);
  const loadBefore = process.cpuUsage();
  let latencySum = 0;
  let latencyCount = 0;
  const result = await runAutocannon(server.origin, load, run, run.duration, (milliseconds) => {
    latencySum += milliseconds;
    latencyCount++;
  });
  const loadUsed = process.cpuUsage(loadBefore);
  const redisAfter = snapshot(redisPids);
  // Backends opened during the run count from zero; the pool keeps them open, so none is lost.
  const after = snapshot([server.pid, ...(await backendPids(database.sql, database.postmaster, server.pid))]);

  const allocBytes = await measureAllocations(server, load, run);

  const responses = result.requests.total;
  const perResponse = (micros: number) => (responses > 0 ? micros / responses : 0);
  const serverCpu = after.has(server.pid) && before.has(server.pid) ? after.get(server.pid)! - before.get(server.pid)! : undefined;
  before.delete(server.pid);
  after.delete(server.pid);
  return {
    reqPerSec: responses / result.duration,
    meanMs: latencyCount > 0 ? latencySum / latencyCount : 0,
    p50: result.latency.p50,
    p99: result.latency.p99,
    responses,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    serverCpu: serverCpu === undefined ? undefined : perResponse(serverCpu),
    postgresCpu: database.postmaster === undefined ? undefined : perResponse(cpuBetween(before, after)),
    redis,
    redisCpu: redisAfter.size > 0 && redisBefore.size > 0 ? perResponse(cpuBetween(redisBefore, redisAfter)) : undefined,
    loadCpu: perResponse(loadUsed.user + loadUsed.system),
    allocBytes,
  };
}
