// Bench-only entry: the service with our rate limiter off (BENCH_LIMITER=off), with our rate limit but no
// concurrency cap (BENCH_LIMITER=rate-only: a decision and no lease release, like the peer), with the peer
// in its place (BENCH_LIMITER=peer): rate-limiter-flexible's Postgres store in front of the same routes, or
// with only the round trips of a limiter with a cap (BENCH_LIMITER=round-trips): a `select 1` on the
// limiter's connection before the request and another after it, nothing decided.
import { serve } from '@hono/node-server';
import type { MiddlewareHandler } from 'hono';
import pg from 'pg';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { openDatabase } from '../db/client.ts';
import { demoRegistry } from '../demo/collections.ts';
import { createLogger } from '../lib/http/logger.ts';
import { loadCursorSecret } from '../lib/pagination/cursor-secret.ts';
import { buildApp } from '../lib/service/app.ts';
import { parseConfig } from '../lib/service/config.ts';

// The peer's Postgres store wants a node-postgres Pool (pg, a dev dependency of the bench only).
const { Pool } = pg;

const mode = process.env.BENCH_LIMITER;
if (mode !== 'off' && mode !== 'rate-only' && mode !== 'peer' && mode !== 'round-trips') {
  throw new Error(`Invalid BENCH_LIMITER: expected off, rate-only, peer or round-trips, got "${mode}"`);
}
const config = parseConfig(process.env);
if (!config.databaseUrl) throw new Error('The bench gives every server a DATABASE_URL');
// The same pool as server.ts opens, so that "limiter off" differs from the service only by the limiter.
const database = openDatabase(config.databaseUrl, {
  max: config.databasePoolSize,
  statementTimeoutMs: config.statementTimeoutMs,
  poolTimeoutMs: config.poolTimeoutMs,
});
const cursorSecret = await loadCursorSecret(database.drizzle, config.cursorSecret);
// rate-only: no lease is taken (leaseTtlSeconds 0), so no release either.
const rateLimit = mode === 'rate-only' ? { leaseTtlSeconds: 0 } : false;
// The request log and the metrics as the service has them (its log level, metrics with an ADMIN_TOKEN, which
// the bench gives every limiter server as it gives the service): the rows then differ by the limiter only.
const logger = createLogger({ level: config.logLevel, pretty: process.stdout.isTTY });
const app = buildApp({ database, config, registry: demoRegistry(), cursorSecret, rateLimit, logger });

/** The peer as its docs advise: one pooled client, consume() per request, the same headers as ours. */
async function peerLimiter(): Promise<MiddlewareHandler> {
  const pool = new Pool({ connectionString: config.databaseUrl, max: 10 });
  const limiter = await new Promise<RateLimiterPostgres>((resolve, reject) => {
    const created: RateLimiterPostgres = new RateLimiterPostgres(
      { storeClient: pool, tableName: 'bench_rlflx', points: 1_000_000_000, duration: 60 },
      (error?: Error) => (error ? reject(error) : resolve(created)),
    );
  });
  return async function peer(c, next) {
    const key = c.req.header('authorization') ?? c.env?.incoming?.socket?.remoteAddress ?? 'unknown';
    let res: RateLimiterRes;
    try {
      res = await limiter.consume(key, 1);
    } catch (rejected) {
      if (!(rejected instanceof RateLimiterRes)) throw rejected;
      return c.json({ code: 'Request_limit_exceeded' }, 429, { 'retry-after': String(Math.ceil(rejected.msBeforeNext / 1000)) });
    }
    await next();
    c.header('x-ratelimit-limit', String(limiter.points));
    c.header('x-ratelimit-remaining', String(res.remainingPoints));
    c.header('x-ratelimit-reset', String(Math.ceil((Date.now() + res.msBeforeNext) / 1000)));
  };
}

/**
 * The two waits of a limiter with a concurrency cap that decides in PostgreSQL, with nothing in them: a
 * round trip on the limiter's own connection before the request (the decision) and one after it, before the
 * answer leaves (the release). Each request sends its own `select 1`s; postgres.js pipelines those that
 * meet on the connection. A limiter that shares one statement among many requests can cost less under load,
 * but not by skipping the waits (docs/benchmarks.md).
 */
const roundTrips: MiddlewareHandler = async (_c, next) => {
  await database.limiter.sql`select 1`;
  try {
    await next();
  } finally {
    await database.limiter.sql`select 1`;
  }
};

const middleware = mode === 'peer' ? await peerLimiter() : mode === 'round-trips' ? roundTrips : undefined;
const entry = middleware === undefined ? app : new (await import('hono')).Hono().use('/v1/*', middleware).route('/', app);
const server = serve({ fetch: entry.fetch, port: config.port }, (info) => console.log(`Listening on ${info.port} (limiter ${mode})`));
process.on('SIGTERM', () => server.close(() => void database.close().then(() => process.exit(0))));
