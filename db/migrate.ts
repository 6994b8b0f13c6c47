// Applies the drizzle-kit migrations, then the SQL functions of db/functions, under an advisory lock, so
// instances starting at once do not race. Everything lands in the service's own schema (SERVICE_SCHEMA), its
// journal too; a database of an earlier release, whose tables were in public and whose journal was in schema
// drizzle, has its tables moved there first (adoptEarlierRelease).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';
import { applyFunctions, readFunctionFiles } from './functions.ts';
import { SERVICE_SCHEMA } from './service-schema.ts';

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));
/** The migrations of the releases whose tables were in public, journal in schema drizzle: only ever caught up on. */
const legacyFolder = fileURLToPath(new URL('./legacy-migrations', import.meta.url));

// An arbitrary constant: the advisory lock key that serialises migrations across instances.
const MIGRATION_LOCK = 7_204_119_001;

/** The service's tables an earlier release kept in public: moved into the service's schema, rows and all. */
const LEGACY_TABLES = ['settings', 'rate_tiers', 'api_keys', 'rate_windows'] as const;
/** Its SQL functions, in public: dropped there, and made again in the service's schema by the functions step. */
const LEGACY_FUNCTIONS = ['rate_decide', 'rate_release', 'rate_refund', 'rate_housekeep'] as const;
/**
 * How many of this folder's migrations make what an earlier release's database holds once its tables are moved:
 * the tables (0000_baseline) and their settings and default tiers (0001_service_settings). They are recorded as
 * applied there, not run; any later migration runs as on every database.
 */
const ADOPTED_MIGRATIONS = 2;

export interface MigrationOptions {
  /**
   * Whether the rate limiter's functions (db/functions) are applied too (default true). Without them, the
   * service's schema holds its tables only.
   */
  readonly functions?: boolean;
}

export async function runMigrations(url: string, options: MigrationOptions = {}): Promise<void> {
  // One dedicated connection: a session-level advisory lock belongs to the connection that took it.
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    try {
      await adoptEarlierRelease(sql);
      await migrate(drizzle(sql), { migrationsFolder, migrationsSchema: SERVICE_SCHEMA });
      if ((options.functions ?? true) && !(await migratedByNewerRelease(sql)))
        await applyFunctions(sql, readFunctionFiles(), MIGRATION_LOCK);
    } catch (error) {
      throw await withoutPrivilege(sql, error);
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    await sql.end();
  }
}

/** SQLSTATE insufficient_privilege. */
const PERMISSION_DENIED = '42501';

/**
 * A migration the role may not run, as the one line an operator acts on: who may not do what where, and the two ways
 * out (docs/how-to/limiter-databases.md). drizzle's migrator reports it as the statement that failed, its cause
 * PostgreSQL's error; `CREATE SCHEMA IF NOT EXISTS` needs CREATE on the database even where the schema exists.
 * Any other error is returned as it is.
 */
async function withoutPrivilege(sql: Sql, error: unknown): Promise<unknown> {
  let cause: unknown = error;
  while (cause instanceof Error && (cause as { code?: unknown }).code !== PERMISSION_DENIED) cause = cause.cause;
  if (!(cause instanceof Error)) return error;
  const [who] = await sql<{ role: string; database: string }[]>`select current_user as role, current_database() as database`.catch(() => [
    undefined,
  ]);
  const role = who?.role ?? 'the role';
  const database = who?.database ?? 'the database';
  return new Error(
    `the role ${role} may not create the service's schema ${SERVICE_SCHEMA} in database ${database} (PostgreSQL: ${cause.message}): ` +
      `grant it CREATE on the database (GRANT CREATE ON DATABASE ${quoteIdentifier(database)} TO ${quoteIdentifier(role)}), ` +
      "or set LIMITER_DATABASE_URL to a database where it may, which then holds the service's state (docs/how-to/limiter-databases.md)",
    { cause: error },
  );
}

function quoteIdentifier(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replaceAll('"', '""')}"`;
}

/** Our journal's entries, oldest first. */
function journalEntries(folder: string): { when: number; tag: string }[] {
  return (JSON.parse(readFileSync(`${folder}/meta/_journal.json`, 'utf8')) as { entries: { when: number; tag: string }[] }).entries;
}

/**
 * A database an earlier release migrated (drizzle's journal in schema drizzle, none in the service's schema)
 * becomes one of this layout in place (docs/how-to/upgrading.md): the earlier release's migrations are
 * caught up on, then, in one transaction, its tables (settings with the cursor secret and the limiter's
 * identity, rate_tiers, api_keys, rate_windows) are moved into the service's schema with their rows, indexes,
 * constraints and table settings; its functions are dropped from public (the functions step makes them again
 * in the service's schema); our journal records the migrations that made what was moved; and the old journal
 * gets a row newer than any of its release's, so that an instance of that release started afterwards applies
 * nothing and makes no table in public again. The demo's tables are the demo's own to move (demo/migrate.ts).
 * Returns whether it did.
 */
async function adoptEarlierRelease(sql: Sql): Promise<boolean> {
  const [state] = await sql<{ ours: boolean; earlier: boolean }[]>`
    select to_regclass(${`${SERVICE_SCHEMA}.__drizzle_migrations`}) is not null as ours,
           to_regclass('drizzle.__drizzle_migrations') is not null as earlier`;
  if (state!.ours || !state!.earlier) return false;
  await migrate(drizzle(sql), { migrationsFolder: legacyFolder });
  await sql.begin(async (tx) => {
    const present = await tx<{ name: string }[]>`
      select c.relname as name from pg_class c where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
        and c.relname in ${tx(LEGACY_TABLES)}`;
    const missing = LEGACY_TABLES.filter((table) => !present.some((row) => row.name === table));
    if (missing.length > 0) {
      throw new Error(
        `schema drizzle holds the migrations' journal of an earlier release, but public has no ${missing.join(', ')}: not a database this service can upgrade`,
      );
    }
    const schema = tx(SERVICE_SCHEMA);
    await tx`create schema if not exists ${schema}`;
    for (const table of LEGACY_TABLES) await tx`alter table public.${tx(table)} set schema ${schema}`;
    const functions = await tx<{ signature: string }[]>`
      select p.oid::regprocedure::text as signature from pg_proc p
        where p.pronamespace = 'public'::regnamespace and p.proname in ${tx(LEGACY_FUNCTIONS)}`;
    for (const { signature } of functions) await tx.unsafe(`drop function ${signature}`);
    // The same table drizzle's migrator makes (drizzle-orm's pg-core dialect), with the moved part recorded.
    await tx`create table if not exists ${schema}.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)`;
    for (const migration of readMigrationFiles({ migrationsFolder }).slice(0, ADOPTED_MIGRATIONS)) {
      await tx`insert into ${schema}.__drizzle_migrations (hash, created_at) values (${migration.hash}, ${migration.folderMillis})`;
    }
    const newer = Math.max(
      ...journalEntries(migrationsFolder).map((entry) => entry.when),
      ...journalEntries(legacyFolder).map((e) => e.when + 1),
    );
    await tx`insert into drizzle.__drizzle_migrations (hash, created_at) values (${`moved to schema ${SERVICE_SCHEMA}`}, ${newer})`;
  });
  return true;
}

/**
 * The cursor secret an earlier release kept on a data database it migrated (public.settings, beside drizzle's
 * journal in schema drizzle), read only: with LIMITER_DATABASE_URL the secret now lives on the limiter databases,
 * which take it over at their first start so that cursors handed out before stay valid. Undefined when there is
 * none, or the role may not read it; rejects when the database cannot be asked.
 */
export async function earlierCursorSecret(url: string): Promise<string | undefined> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, prepare: false, connect_timeout: 10 });
  try {
    const [state] = await sql<{ earlier: boolean }[]>`
      select to_regclass('drizzle.__drizzle_migrations') is not null and to_regclass('public.settings') is not null as earlier`;
    if (!state!.earlier) return undefined;
    const [row] = await sql<{ value: string }[]>`select value from public.settings where name = 'cursor_secret'`;
    return row?.value;
  } catch (error) {
    // No SELECT on it: a new secret, as CURSOR_SECRET's documentation says (docs/how-to/upgrading.md).
    // Anything else (the database away, a timeout) fails the start: a new secret, once kept, would be for good.
    if ((error as { code?: unknown }).code === '42501') return undefined;
    throw error;
  } finally {
    await sql.end();
  }
}

/**
 * Whether the database holds a migration this release does not know: an instance of the previous release
 * starting during a rolling deploy. It leaves the functions as the newer release made them, rather than put
 * its own definitions back (docs/reference/database.md, "Migrations").
 */
async function migratedByNewerRelease(sql: Sql): Promise<boolean> {
  const ours = Math.max(...journalEntries(migrationsFolder).map((entry) => entry.when));
  const [row] = await sql`select max(created_at)::bigint as latest from ${sql(SERVICE_SCHEMA)}.__drizzle_migrations`;
  return Number(row!.latest) > ours;
}
