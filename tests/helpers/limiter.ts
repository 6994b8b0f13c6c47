// A rate-limited app on a fresh test database, with a movable database clock and per-request addresses.
import type { Hono } from 'hono';
import type { Sql } from 'postgres';
import { seedTable } from '../../db/seed.ts';
import { buildApp } from '../../lib/http/app.ts';
import { type Config, parseConfig } from '../../lib/http/config.ts';
import { demoRegistry } from '../../lib/pagination/demo-collections.ts';
import type { LimiterOptions } from '../../lib/ratelimit/middleware.ts';
import { type TestDatabase, testDatabase } from './db.ts';

export const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';

export interface LimitedApp {
  readonly app: Hono;
  readonly database: TestDatabase;
  readonly config: Config;
  /** Seconds the database clock is moved forward for the limiter; tests move it instead of sleeping. */
  clock: number;
  /** A request from `address` (the socket's, as the server would see it). */
  request(path: string, init?: RequestInit & { address?: string }): Promise<Response>;
  /** Sets a tier's values directly in the database. */
  setTier(name: string, limit: number, windowSeconds: number, concurrency?: number): Promise<void>;
}

export async function limitedApp(
  t: { teardown(fn: () => unknown): void },
  options: { env?: Record<string, string>; limiter?: LimiterOptions; products?: number } = {},
): Promise<LimitedApp> {
  const database = await testDatabase(t);
  await seedTable(database.sql, 'products', options.products ?? 50);
  const config = parseConfig({ ADMIN_TOKEN, ...options.env });
  const state = {
    clock: 0,
  } as LimitedApp;
  const app = buildApp({
    database,
    config,
    registry: demoRegistry(),
    cursorSecret: 'x'.repeat(32),
    log: (error) => console.error(error),
    rateLimit: {
      // The socket's address, as a test sets it; no real socket exists under app.request().
      remoteAddress: (c) => c.req.header('x-test-socket') ?? '192.0.2.1',
      clockOffset: () => state.clock,
      housekeepingMs: 0,
      ...options.limiter,
    },
  });
  return Object.assign(state, {
    app,
    database,
    config,
    async request(path: string, init: RequestInit & { address?: string } = {}) {
      const headers = new Headers(init.headers);
      if (init.address) headers.set('x-test-socket', init.address);
      return app.request(`http://test.local${path}`, { ...init, headers });
    },
    async setTier(name: string, limit: number, windowSeconds: number, concurrency = 4) {
      await database.sql`
        insert into rate_tiers (name, allowance, window_seconds, concurrency)
        values (${name}, ${limit}, ${windowSeconds}, ${concurrency})
        on conflict (name) do update set allowance = excluded.allowance,
          window_seconds = excluded.window_seconds, concurrency = excluded.concurrency`;
    },
  });
}

/** The rate-limit headers of a response as numbers. */
export function limits(res: Response): { limit: number; remaining: number; reset: number; retryAfter: number | undefined } {
  const retry = res.headers.get('retry-after');
  return {
    limit: Number(res.headers.get('x-ratelimit-limit')),
    remaining: Number(res.headers.get('x-ratelimit-remaining')),
    reset: Number(res.headers.get('x-ratelimit-reset')),
    retryAfter: retry === null ? undefined : Number(retry),
  };
}

/** The database's clock, in Unix seconds (fractional). */
export async function dbNow(database: TestDatabase): Promise<number> {
  const [row] = await database.sql`select extract(epoch from clock_timestamp())::float8 as now`;
  return Number(row!.now);
}

/** Units charged to `subject` (to every subject when absent) that rate_windows still holds. */
export async function chargedUnits(sql: Sql, subject?: string): Promise<number> {
  const [row] = await sql`
    select coalesce(sum(used), 0)::int as units from rate_windows where ${subject === undefined ? sql`true` : sql`subject = ${subject}`}`;
  return row!.units as number;
}

/** Concurrency leases of `subject` (of every subject when absent) that are held now. */
export async function liveLeases(sql: Sql, subject?: string): Promise<number> {
  const [row] = await sql`
    select count(*)::int as n from rate_windows w, unnest(w.lease_expires) as e
    where e > extract(epoch from clock_timestamp()) and ${subject === undefined ? sql`true` : sql`w.subject = ${subject}`}`;
  return row!.n as number;
}
