// The database clients: one postgres.js pool with the Drizzle instance over it, and the rate limiter's
// own connection.
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres, { type Options, type Sql } from 'postgres';
import * as schema from './schema.ts';

export type Db = PostgresJsDatabase<typeof schema>;

export interface Database {
  readonly sql: Sql;
  readonly db: Db;
  /**
   * One connection for the rate limiter's decisions and lease releases (lib/limiter.ts keeps at most two
   * statements in flight on it, pipelined): they never queue behind data queries that fill the pool, so
   * the limiter keeps answering, and declining, while the collections are slow.
   */
  readonly limiterSql: Sql;
  /** Closes both, letting statements in flight finish for up to 5 s. */
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Pool size. */
  max?: number;
}

export function openDatabase(url: string, options: DatabaseOptions = {}): Database {
  const common: Options<Record<string, never>> = {
    // A database that is away must turn into a quick 503, not a hanging request.
    connect_timeout: 2,
    // postgres.js waits up to 20 s between reconnection attempts after failures (3^n / 100 s), and
    // queues queries meanwhile: a database that is back would stay unused for that long. Retry
    // within half a second, so a database that is away is a quick 503 and one that is back is used.
    backoff: (retries: number) => Math.min(0.05 * retries, 0.5),
    idle_timeout: 30,
    onnotice: () => {},
  };
  const sql = postgres(url, { ...common, max: options.max ?? 10, connection: { application_name: 'collections' } });
  const limiterSql = postgres(url, { ...common, max: 1, connection: { application_name: 'collections-limiter' } });
  return {
    sql,
    db: drizzle(sql, { schema }),
    limiterSql,
    async close() {
      await Promise.all([sql.end({ timeout: 5 }), limiterSql.end({ timeout: 5 })]);
    },
  };
}
