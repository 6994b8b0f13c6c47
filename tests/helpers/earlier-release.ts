// A database as an earlier release left it, made from that release's own files, read from git history: its migrations
// (tables in public, drizzle's journal in schema drizzle) and, from the release that had them, its SQL functions
// (applied in public as its functions step did, recorded in drizzle.schema_functions).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import type { Sql } from 'postgres';
import { applyFunctions } from '../../db/functions.ts';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

/** The last commit whose migrations each carried the whole functions (0000 to 0007). */
export const FUNCTIONS_IN_MIGRATIONS_RELEASE = '7dcc92b';
/** The last release before the service's own schema (issue 40): migrations 0000 to 0008, functions from db/functions. */
export const PUBLIC_SCHEMA_RELEASE = '4c0d917';
/**
 * The last release before keys had scopes and claims (issue 46): migrations 0000 and 0001 in the service's schema,
 * and its functions, rate_decide returning no key_collections or key_claims.
 */
const SERVICE_SCHEMA_RELEASE = '38a54e6';

interface Teardown {
  teardown(fn: () => unknown): void;
}

const show = async (commit: string, file: string) =>
  (await run('git', ['show', `${commit}:${file}`], { cwd: root, maxBuffer: 1 << 24 })).stdout;

/** `commit`'s migrations up to index `last` (all by default), as its files were, in a folder drizzle's migrator reads. */
export async function earlierMigrations(t: Teardown, commit: string, last?: number): Promise<string> {
  const journal = JSON.parse(await show(commit, 'db/migrations/meta/_journal.json')) as { entries: { tag: string }[] };
  if (last !== undefined) journal.entries = journal.entries.slice(0, last + 1);
  const folder = await mkdtemp(path.join(tmpdir(), 'old-migrations-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  await mkdir(path.join(folder, 'meta'));
  await writeFile(path.join(folder, 'meta', '_journal.json'), JSON.stringify(journal));
  for (const { tag } of journal.entries) await writeFile(path.join(folder, `${tag}.sql`), await show(commit, `db/migrations/${tag}.sql`));
  return folder;
}

/**
 * The database PUBLIC_SCHEMA_RELEASE made on `sql`'s database: its migrations, then its functions in public, recorded
 * as its functions step recorded them.
 */
export async function migrateAsPublicSchemaRelease(t: Teardown, sql: Sql): Promise<void> {
  await migrate(drizzle(sql), { migrationsFolder: await earlierMigrations(t, PUBLIC_SCHEMA_RELEASE) });
  const listing = (await run('git', ['ls-tree', '--name-only', `${PUBLIC_SCHEMA_RELEASE}:db/functions`], { cwd: root })).stdout;
  await sql`create table if not exists drizzle.schema_functions (
    name text primary key, checksum text not null, applied_at timestamptz not null default now())`;
  for (const file of listing
    .split('\n')
    .filter((name) => name.endsWith('.sql'))
    .sort()) {
    const text = await show(PUBLIC_SCHEMA_RELEASE, `db/functions/${file}`);
    await sql.unsafe(text);
    const checksum = createHash('sha256').update(text).digest('hex');
    await sql`insert into drizzle.schema_functions (name, checksum) values (${path.basename(file, '.sql')}, ${checksum})`;
  }
}

/**
 * The database SERVICE_SCHEMA_RELEASE made on `sql`'s database: its migrations, journal in the service's schema, then
 * its functions, applied and recorded by the functions step (db/functions.ts, unchanged since).
 */
export async function migrateAsServiceSchemaRelease(t: Teardown, sql: Sql): Promise<void> {
  await migrate(drizzle(sql), { migrationsFolder: await earlierMigrations(t, SERVICE_SCHEMA_RELEASE), migrationsSchema: SERVICE_SCHEMA });
  const listing = (await run('git', ['ls-tree', '--name-only', `${SERVICE_SCHEMA_RELEASE}:db/functions`], { cwd: root })).stdout;
  const files = [];
  for (const file of listing
    .split('\n')
    .filter((name) => name.endsWith('.sql'))
    .sort()) {
    files.push({ name: path.basename(file, '.sql'), sql: await show(SERVICE_SCHEMA_RELEASE, `db/functions/${file}`) });
  }
  // The migrations' advisory lock key (db/migrate.ts).
  await applyFunctions(sql, files, 7_204_119_001);
}
