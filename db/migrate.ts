// Applies the drizzle-kit migrations under an advisory lock, so instances starting at once do not race.
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

// An arbitrary constant: the advisory lock key that serialises migrations across instances.
const MIGRATION_LOCK = 7_204_119_001;

export async function runMigrations(url: string): Promise<void> {
  // One dedicated connection: a session-level advisory lock belongs to the connection that took it.
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    try {
      await migrate(drizzle(sql), { migrationsFolder });
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    await sql.end();
  }
}
