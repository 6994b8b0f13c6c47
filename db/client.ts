// The database client: one postgres.js pool and the Drizzle instance over it.
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres, { type Sql } from 'postgres';
import * as schema from './schema.ts';

export type Db = PostgresJsDatabase<typeof schema>;

export interface Database {
  readonly sql: Sql;
  readonly db: Db;
}

export interface DatabaseOptions {
  /** Pool size. */
  max?: number;
}

export function openDatabase(url: string, options: DatabaseOptions = {}): Database {
  const sql = postgres(url, {
    max: options.max ?? 10,
    // A database that is away must turn into a quick 503, not a hanging request.
    connect_timeout: 2,
    // postgres.js waits up to 20 s between reconnection attempts after failures (3^n / 100 s), and
    // queues queries meanwhile: a database that is back would stay unused for that long. Retry
    // within half a second, so a database that is away is a quick 503 and one that is back is used.
    backoff: (retries: number) => Math.min(0.05 * retries, 0.5),
    idle_timeout: 30,
    onnotice: () => {},
    connection: { application_name: 'collections' },
  });
  return { sql, db: drizzle(sql, { schema }) };
}
