// Builds the app on a fresh test database; requests go through app.request, no port is opened.
import type { Context, Hono } from 'hono';
import { demoRegistry } from '../../demo/collections.ts';
import { type SeedSizes, type SeedTable, seedTable } from '../../demo/seed.ts';
import type { Logger } from '../../lib/http/logger.ts';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import type { Registry } from '../../lib/pagination/registry.ts';
import type { LimiterOptions } from '../../lib/ratelimit/gate.ts';
import { buildApp } from '../../lib/service/app.ts';
import { type Config, parseConfig } from '../../lib/service/config.ts';
import { type TestDatabase, testDatabase, withSession } from './db.ts';

/** The operator token of every test app (unless its `env` says otherwise) and of test servers that want one. */
export const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';

/** The socket address of a request when the test gives none. */
const DEFAULT_ADDRESS = '192.0.2.1';

export interface TestAppOptions {
  /** Rows to seed in each demo table; none by default. */
  seed?: SeedSizes;
  /** The environment the config is parsed from, on top of ADMIN_TOKEN. */
  env?: Record<string, string>;
  /** The collections served (default: the demo ones). */
  registry?: Registry;
  /**
   * The rate limiter in front of /v1: off by default; true, or options on top of the tests' own (the socket
   * address a request gives, the movable clock, no housekeeping unless asked for).
   */
  rateLimit?: boolean | LimiterOptions;
  /** Where request lines and errors go (default: errors only, on stderr). */
  logger?: Logger;
  /** Whether the app is draining after a stop signal (default: never). */
  draining?: () => boolean;
  /** The pool's statement_timeout (default 5000 ms): a data query waiting longer is a 503. */
  statementTimeoutMs?: number;
}

export interface TestApp {
  readonly app: Hono;
  readonly database: TestDatabase;
  readonly config: Config;
  /** Seconds the database clock is moved forward for the rate limiter; tests move it instead of sleeping. */
  clock: number;
  /**
   * GET (by default) a path on http://test.local; returns the response. `address` is the socket's (as the
   * server would see it) for the rate limiter; 192.0.2.1 when absent.
   */
  request(path: string, init?: RequestInit & { address?: string }): Promise<Response>;
  /** GET a path and parse its JSON body. */
  json(path: string, init?: RequestInit): Promise<{ status: number; body: any; headers: Headers }>;
}

export async function testApp(t: { teardown(fn: () => unknown): void }, options: TestAppOptions = {}): Promise<TestApp> {
  const database = await testDatabase(t, { statementTimeoutMs: options.statementTimeoutMs });
  // On a session of its own: the app's pool may have a statement timeout shorter than a seed takes on a busy machine.
  const seeds = Object.entries(options.seed ?? {}).filter(([, count]) => count);
  if (seeds.length > 0) {
    await withSession(database.url, async (sql) => {
      for (const [table, count] of seeds) await seedTable(sql, table as SeedTable, count!);
    });
  }
  const config = parseConfig({ ADMIN_TOKEN, ...options.env });
  const cursorSecret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  let clock = 0;
  const rateLimit: LimiterOptions | false = options.rateLimit
    ? {
        clockOffset: () => clock,
        housekeepingMs: 0,
        ...(options.rateLimit === true ? {} : options.rateLimit),
      }
    : false;
  const app = buildApp({
    database,
    config,
    registry: options.registry ?? demoRegistry(),
    cursorSecret,
    rateLimit,
    // No real socket exists under app.request(): the address is the one the test gave.
    ...(options.rateLimit ? { remoteAddress: (c: Context) => c.req.header('x-test-socket') ?? DEFAULT_ADDRESS } : {}),
    logger: options.logger,
    draining: options.draining,
  });
  const request = async (path: string, init: RequestInit & { address?: string } = {}) => {
    const { address, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (address) headers.set('x-test-socket', address);
    return app.request(`http://test.local${path}`, { ...rest, headers });
  };
  return {
    app,
    database,
    config,
    get clock() {
      return clock;
    },
    set clock(seconds: number) {
      clock = seconds;
    },
    request,
    async json(path, init) {
      const res = await request(path, init);
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
    },
  };
}

/** A path of the test app from an absolute href of its links. */
export function pathOf(href: string): string {
  return href.replace(/^http:\/\/test\.local/, '');
}
