// The demo's migrations (demo/migrations, from demo/schema.ts), their journal in schema demo, under an advisory lock
// of their own: run only where the demo is served (COLLECTIONS=demo, or the embedded default).
import { fileURLToPath } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';
import { DEMO_SCHEMA } from './schema.ts';

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

// An arbitrary constant, next to the service's migration lock (db/migrate.ts).
const DEMO_MIGRATION_LOCK = 7_204_119_004;

/** The demo's tables, and the CHECK each had in public under an earlier release: how they are told from a team's. */
const EARLIER_TABLES = [
  { name: 'products', check: 'products_created_at_rfc3339' },
  { name: 'orders', check: 'orders_created_at_rfc3339' },
  { name: 'events', check: 'events_occurred_at_rfc3339' },
] as const;

/** Makes (or upgrades) the demo's tables in schema demo on `url`'s database. */
export async function migrateDemo(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql`select pg_advisory_lock(${DEMO_MIGRATION_LOCK})`;
    try {
      await adoptEarlierDemo(sql);
      await migrate(drizzle(sql), { migrationsFolder, migrationsSchema: DEMO_SCHEMA });
    } finally {
      await sql`select pg_advisory_unlock(${DEMO_MIGRATION_LOCK})`;
    }
  } finally {
    await sql.end();
  }
}

/**
 * An earlier release made the demo's tables in public on every database it served: where schema demo holds no
 * journal yet and public holds all three, each with the CHECK that release gave it, they are moved into schema
 * demo with their rows, indexes, constraints and identity sequences, and the demo's baseline is recorded as
 * applied. Anywhere else nothing in public is touched.
 */
async function adoptEarlierDemo(sql: Sql): Promise<void> {
  const [journal] = await sql`select to_regclass(${`${DEMO_SCHEMA}.__drizzle_migrations`}) is not null as present`;
  if (journal!.present) return;
  const found = await sql<{ name: string }[]>`
    select c.relname as name from pg_class c join pg_constraint k on k.conrelid = c.oid
      where c.relnamespace = 'public'::regnamespace and c.relkind = 'r' and k.contype = 'c'
        and (c.relname, k.conname) in (${sql.unsafe(EARLIER_TABLES.map((table) => `('${table.name}', '${table.check}')`).join(', '))})`;
  if (found.length !== EARLIER_TABLES.length) return;
  await sql.begin(async (tx) => {
    const schema = tx(DEMO_SCHEMA);
    await tx`create schema if not exists ${schema}`;
    for (const table of EARLIER_TABLES) await tx`alter table public.${tx(table.name)} set schema ${schema}`;
    await tx`create table if not exists ${schema}.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)`;
    const [baseline] = readMigrationFiles({ migrationsFolder });
    await tx`insert into ${schema}.__drizzle_migrations (hash, created_at) values (${baseline!.hash}, ${baseline!.folderMillis})`;
  });
}
