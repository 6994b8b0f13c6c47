// Start-up shared by the Node, Deno and Bun entries: the database (embedded or DATABASE_URL), migrations,
// seeding and the cursor secret on a direct connection, then the pools and the app.
import { drizzle } from 'drizzle-orm/postgres-js';
import type { Context, Hono } from 'hono';
import postgres, { type Sql } from 'postgres';
import { type Database, openDatabase } from '../../db/client.ts';
import { resolveDatabaseUrl } from '../../db/embedded.ts';
import { runMigrations } from '../../db/migrate.ts';
import { pooledByUrl, probeServer } from '../../db/probe.ts';
import * as schema from '../../db/schema.ts';
import { defaultSizes, seedIfEmpty } from '../../db/seed.ts';
import { loadCursorSecret } from '../pagination/cursor-secret.ts';
import { demoRegistry } from '../pagination/demo-collections.ts';
import { buildApp } from './app.ts';
import { type Config, ConfigError, parseConfig } from './config.ts';

export interface Service {
  readonly app: Hono;
  readonly database: Database;
  /** Closes the pools, then stops the embedded PostgreSQL if this process started it. */
  release(): Promise<void>;
  /** Last words before the process exits in a hurry: stops the embedded PostgreSQL's server at once. */
  abandon(): void;
}

export interface StartOptions {
  readonly log: (line: string) => void;
  /** The socket's peer address as the runtime reports it (Node's by default: lib/http/forwarding.ts). */
  readonly remoteAddress?: (c: Context) => string | undefined;
}

/** The configuration, or the process ends with the one line that names the bad variable. */
export function readConfig(env: Record<string, string | undefined>): Config {
  try {
    return parseConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
}

/**
 * One warning line when the PostgreSQL server runs with autovacuum off (a server setting, not one of a
 * database): the rate limiter rewrites a row of `rate_windows` on every request, and without autovacuum
 * nothing removes the dead versions, so the table and every decision's work keep growing
 * (docs/operations.md, "Autovacuum").
 */
async function warnWithoutAutovacuum(sql: Sql, log: (line: string) => void): Promise<void> {
  const [row] = await sql`select current_setting('autovacuum') as autovacuum`;
  if (row?.autovacuum !== 'on') {
    log(
      `Warning: autovacuum is ${row?.autovacuum ?? 'unknown'} on this PostgreSQL server; the rate limiter's table rate_windows needs it, or its dead rows pile up and slow every request (docs/operations.md, "Autovacuum")`,
    );
  }
}

/**
 * The URL for session-level work must reach the primary itself: a migration holds an advisory lock for its
 * session, which a transaction pooler would leave on a server connection that others then get (they wait
 * for it for good), and a standby refuses every write.
 */
async function checkDirect(url: string, name: string): Promise<void> {
  const server = await probeServer(url);
  if (server.pooler) {
    throw new Error(`${name} leads to a connection pooler; set DATABASE_DIRECT_URL to the database itself, for migrations and seeding`);
  }
  if (server.standby) {
    throw new Error(
      `${name} leads to a standby, which refuses writes; set DATABASE_URL to the primary and DATABASE_READ_URL to the standby`,
    );
  }
}

/** Whether a transaction pooler leads to `url`: the URL's `prepare` says so, or the server is asked. */
async function pooled(url: string): Promise<boolean> {
  return pooledByUrl(url) ?? (await probeServer(url)).pooler;
}

/** Everything up to serving: rejects with an Error whose message is the one line an operator reads. */
export async function startService(config: Config, options: StartOptions): Promise<Service> {
  const { log } = options;
  const postgresServer = await resolveDatabaseUrl(config.databaseUrl, log);
  const url = postgresServer.url;
  const directUrl = config.databaseDirectUrl ?? url;
  await checkDirect(directUrl, config.databaseDirectUrl ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL');
  await runMigrations(directUrl);
  const open = (sessionUrl: string) => postgres(sessionUrl, { max: 1, onnotice: () => {} });
  const seeded = await seedIfEmpty(directUrl, defaultSizes, open);
  if (seeded.length > 0) log(`Seeded demo data: ${seeded.join(', ')}`);
  const session = open(directUrl);
  let cursorSecret: string;
  try {
    cursorSecret = await loadCursorSecret(drizzle(session, { schema }), config.cursorSecret);
    await warnWithoutAutovacuum(session, log);
  } finally {
    await session.end();
  }

  // The direct URL was found to be no pooler: DATABASE_URL, when it is the same, need not be asked again.
  const isPooled = directUrl === url ? (pooledByUrl(url) ?? false) : await pooled(url);
  const readUrl = config.databaseReadUrl;
  const database = openDatabase(url, {
    max: config.databasePoolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    poolTimeoutMs: config.poolTimeoutMs,
    pooled: isPooled,
    read: readUrl === undefined ? undefined : { url: readUrl, pooled: await pooled(readUrl) },
  });
  if (isPooled) log('DATABASE_URL leads to a transaction pooler: no named statements, no pipelining');
  const app = buildApp({ database, config, registry: demoRegistry(), cursorSecret, rateLimit: {}, remoteAddress: options.remoteAddress });
  return {
    app,
    database,
    async release() {
      await database.close();
      await postgresServer.stop();
    },
    abandon: () => postgresServer.abandon(),
  };
}
