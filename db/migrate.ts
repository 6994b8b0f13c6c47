// Applies the drizzle-kit migrations, then the SQL functions of db/functions, under an advisory lock, so
// instances starting at once do not race.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';
import { applyFunctions, readFunctionFiles } from './functions.ts';

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

// An arbitrary constant: the advisory lock key that serialises migrations across instances.
const MIGRATION_LOCK = 7_204_119_001;

export interface MigrationOptions {
  /**
   * Whether the rate limiter's functions (db/functions) are applied too (default true): false on a data
   * database whose limiter is on databases of its own (LIMITER_DATABASE_URL, docs/operations.md, "Limiter
   * databases"), which so holds no function it never calls.
   */
  readonly functions?: boolean;
}

export async function runMigrations(url: string, options: MigrationOptions = {}): Promise<void> {
  // One dedicated connection: a session-level advisory lock belongs to the connection that took it.
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    try {
      await migrate(drizzle(sql), { migrationsFolder });
      if ((options.functions ?? true) && !(await migratedByNewerRelease(sql)))
        await applyFunctions(sql, readFunctionFiles(), MIGRATION_LOCK);
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    await sql.end();
  }
}

/**
 * Whether the database holds a migration this release does not know: an instance of the previous release
 * starting during a rolling deploy. It leaves the functions as the newer release made them, rather than put
 * its own definitions back (docs/operations.md, "Migrations").
 */
async function migratedByNewerRelease(sql: Sql): Promise<boolean> {
  const journal = JSON.parse(readFileSync(`${migrationsFolder}/meta/_journal.json`, 'utf8')) as { entries: { when: number }[] };
  const ours = Math.max(...journal.entries.map((entry) => entry.when));
  const [row] = await sql`select max(created_at)::bigint as latest from drizzle.__drizzle_migrations`;
  return Number(row!.latest) > ours;
}
