// A real server process whose database connections all go through a TCP proxy the test controls.
import { seedTable } from '../../demo/seed.ts';
import { type TestDatabase, testDatabase } from './db.ts';
import { freePort } from './processes.ts';
import { type ServerProcess, startServer } from './servers.ts';
import { startProxy, type TcpProxy } from './tcp-proxy.ts';
import { sleep, waitFor } from './wait.ts';

export interface ProxiedService {
  /** The test's own clients reach the database directly, never through the proxy. */
  readonly database: TestDatabase;
  readonly proxy: TcpProxy;
  readonly server: ServerProcess;
}

/**
 * A fresh database with a little demo data and an anonymous tier that never limits (unless `tier` says
 * otherwise), and a server on it through a proxy; `env` is added to the server's environment.
 */
export async function proxiedService(
  t: { teardown(fn: () => unknown): void },
  options: { env?: Record<string, string>; concurrency?: number } = {},
): Promise<ProxiedService> {
  const database = await testDatabase(t);
  await seedTable(database.sql, 'products', 200);
  await seedTable(database.sql, 'orders', 10);
  await seedTable(database.sql, 'events', 10);
  await database.sql`update paginated_collections.rate_tiers set allowance = 1000000, concurrency = ${options.concurrency ?? 1000} where name = 'anonymous'`;
  const proxy = await startProxy(t, database.url);
  const server = await startServer(t, await freePort(), { DATABASE_URL: proxy.urlOf(database.url), ...options.env });
  return { database, proxy, server };
}

export interface Sample {
  readonly path: string;
  readonly status: number;
  /** performance.now() when the request was sent and when its answer was complete. */
  readonly sent: number;
  readonly done: number;
  readonly headers: Headers | undefined;
  readonly body: string;
}

/** GETs `path` once; a request with no answer in `timeoutMs` (or a dropped connection) has status 0. */
export async function sample(base: string, path: string, timeoutMs = 10_000): Promise<Sample> {
  const sent = performance.now();
  try {
    const res = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
    const body = await res.text();
    return { path, status: res.status, sent, done: performance.now(), headers: res.headers, body };
  } catch {
    return { path, status: 0, sent, done: performance.now(), headers: undefined, body: '' };
  }
}

/**
 * GETs `path` every `intervalMs` (default 100) until it is a 200, and returns every sample, the 200 last;
 * fails after `timeoutMs` (default 10 s). For time to recovery: a service that is back answers quickly.
 */
export async function untilServed(
  base: string,
  path: string,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<Sample[]> {
  const samples: Sample[] = [];
  const next = async () => {
    const answer = await sample(base, path);
    samples.push(answer);
    return answer.status;
  };
  await waitFor(`${path} to answer 200`, next, {
    until: (status) => status === 200,
    timeoutMs: options.timeoutMs ?? 10_000,
    intervalMs: options.intervalMs ?? 100,
  });
  return samples;
}

/** Clients that each send `path` one request after another, `pauseMs` apart, until stopped. */
export function steadyLoad(base: string, paths: string[], pauseMs: number): { samples: Sample[]; stop(): Promise<void> } {
  const samples: Sample[] = [];
  let running = true;
  const loops = paths.map(async (path) => {
    while (running) {
      samples.push(await sample(base, path));
      await sleep(pauseMs);
    }
  });
  return {
    samples,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}
