// The SQL functions step (db/functions.ts): a database made fresh and one upgraded from any earlier release's
// migrations end up with the same functions and schema, the service's own (SERVICE_SCHEMA), and nothing of the
// service outside it; a function file is applied again only when it changed, all changed files or none; two
// instances migrating at once do not conflict.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import type { Sql } from 'postgres';
import t from 'tap';
import { applyFunctions, readFunctionFiles } from '../../db/functions.ts';
import { runMigrations } from '../../db/migrate.ts';
import { emptyDatabase } from '../helpers/db.ts';
import {
  earlierMigrations,
  migrateAsPublicSchemaRelease,
  FUNCTIONS_IN_MIGRATIONS_RELEASE as OLD_RELEASE,
  PUBLIC_SCHEMA_RELEASE,
} from '../helpers/earlier-release.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const LOCK = 7_204_119_001;

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** Every function of the service's schema, as PostgreSQL prints its definition. */
async function functionDefinitions(sql: Sql): Promise<Record<string, string>> {
  const rows = await sql<{ signature: string; definition: string }[]>`
    select p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as signature,
           pg_get_functiondef(p.oid) as definition
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'paginated_collections' order by 1`;
  return Object.fromEntries(rows.map((row) => [row.signature, row.definition]));
}

/**
 * The schema of every schema but PostgreSQL's own, read from the catalogs, a sorted line per object: what
 * `pg_dump --schema-only` would print of it, whatever the server's version. (The embedded server, with no
 * DATABASE_URL, is newer than the pg_dump of Debian's client packages, which refuses to dump it.) Tables with
 * their kind, options and owner; columns with type, collation, default, nullability, identity, generation,
 * storage and statistics target; constraints, indexes, triggers, views, sequences, functions (any schema),
 * extensions, comments and privileges.
 */
async function schemaDescription(sql: Sql): Promise<string> {
  const user =
    "n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast') and n.nspname not like 'pg_temp%' and n.nspname not like 'pg_toast_temp%'";
  const rows = await sql.unsafe<{ line: string }[]>(`
    select 'schema ' || n.nspname || ' owner ' || pg_get_userbyid(n.nspowner) || ' acl ' || coalesce(n.nspacl::text, '-') as line
      from pg_namespace n where ${user}
    union all
    select 'relation ' || n.nspname || '.' || c.relname || ' kind ' || c.relkind::text || ' persistence ' || c.relpersistence::text
           || ' options ' || coalesce(c.reloptions::text, '-') || ' replica ' || c.relreplident::text
           || ' owner ' || pg_get_userbyid(c.relowner) || ' acl ' || coalesce(c.relacl::text, '-')
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where ${user} and c.relkind <> 'i'
    union all
    select 'column ' || n.nspname || '.' || c.relname || '.' || a.attname || ' #' || a.attnum
           || ' ' || format_type(a.atttypid, a.atttypmod) || ' collate ' || coalesce(co.collname, '-')
           || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-') || ' not null ' || a.attnotnull
           || ' identity ' || a.attidentity::text || ' generated ' || a.attgenerated::text || ' storage ' || a.attstorage::text
           || ' statistics ' || coalesce(a.attstattarget::text, '-') || ' acl ' || coalesce(a.attacl::text, '-')
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      left join pg_collation co on co.oid = a.attcollation and a.attcollation <> 0
      where ${user} and a.attnum > 0 and not a.attisdropped and c.relkind in ('r', 'p', 'v', 'm', 'f')
    union all
    select 'constraint ' || n.nspname || '.' || c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
      from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace where ${user}
    union all
    select 'index ' || pg_get_indexdef(i.indexrelid) || ' options ' || coalesce(c.reloptions::text, '-')
      from pg_index i join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace where ${user}
    union all
    select 'trigger ' || pg_get_triggerdef(g.oid)
      from pg_trigger g join pg_class c on c.oid = g.tgrelid join pg_namespace n on n.oid = c.relnamespace
      where ${user} and not g.tgisinternal
    union all
    select 'view ' || n.nspname || '.' || c.relname || ' ' || pg_get_viewdef(c.oid)
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where ${user} and c.relkind in ('v', 'm')
    union all
    select 'sequence ' || s.schemaname || '.' || s.sequencename || ' ' || format_type(s.data_type, null) || ' start ' || s.start_value
           || ' min ' || s.min_value || ' max ' || s.max_value || ' by ' || s.increment_by || ' cycle ' || s.cycle || ' cache ' || s.cache_size
      from pg_sequences s join pg_namespace n on n.nspname = s.schemaname where ${user}
    union all
    select 'function ' || pg_get_functiondef(p.oid) || ' owner ' || pg_get_userbyid(p.proowner) || ' acl ' || coalesce(p.proacl::text, '-')
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where ${user} and p.prokind in ('f', 'p')
    union all
    select 'extension ' || e.extname || ' ' || e.extversion || ' in ' || n.nspname
      from pg_extension e join pg_namespace n on n.oid = e.extnamespace
    union all
    select 'comment ' || d.classoid::regclass::text || ' ' || d.objsubid || ' ' || coalesce(c.relname, p.proname, '?') || ' ' || d.description
      from pg_description d
      left join pg_class c on d.classoid = 'pg_class'::regclass and c.oid = d.objoid
      left join pg_proc p on d.classoid = 'pg_proc'::regclass and p.oid = d.objoid
      join pg_namespace n on n.oid = coalesce(c.relnamespace, p.pronamespace)
      where ${user}
    order by 1`);
  return rows.map((row) => row.line).join('\n');
}

t.test('a database made fresh and one upgraded from each earlier migration have the same functions and schema', async (t) => {
  const fresh = await emptyDatabase(t);
  await runMigrations(fresh.url);
  const functions = await functionDefinitions(fresh.sql);
  t.same(
    Object.keys(functions).map((signature) => signature.slice(0, signature.indexOf('('))),
    readFunctionFiles().map((file) => file.name),
    'one function for each file of db/functions, one signature each',
  );
  const schema = await schemaDescription(fresh.sql);
  t.match(schema, /^function CREATE OR REPLACE FUNCTION paginated_collections\.rate_decide\(/m, 'the description holds the functions');
  t.match(schema, /^index CREATE UNIQUE INDEX \S+ ON paginated_collections\.rate_windows /m, 'and the indexes');
  t.match(
    schema,
    /^relation paginated_collections\.rate_windows kind r persistence p options \{[^}]*fillfactor=50[^}]*toast_tuple_target=4000/m,
    'and the tables with their options',
  );
  const [outside] = await fresh.sql`
    select array(select nspname::text from pg_namespace where nspname not like 'pg\\_%' and nspname <> 'information_schema' order by 1) as schemas,
      (select count(*)::int from pg_class where relnamespace = 'public'::regnamespace) as relations,
      (select count(*)::int from pg_proc where pronamespace = 'public'::regnamespace) as functions,
      (select count(*)::int from pg_type where typnamespace = 'public'::regnamespace) as types`;
  t.same(
    outside,
    { schemas: ['paginated_collections', 'public'], relations: 0, functions: 0, types: 0 },
    'nothing of the service outside its schema',
  );

  // What an upgrade leaves of the earlier layout: the demo's tables in public (moved by the demo's own migrations,
  // where it is served: tests/db/upgrade-in-place.test.ts), and the old journal in schema drizzle, kept with a row newer than
  // its release's, so that an instance of that release started later makes nothing again.
  const serviceOnly = (description: string) =>
    description
      .split('\n')
      .filter((line) => !/^schema drizzle |\bdrizzle\.|\bpublic\.(products|orders|events)(_id_seq)?\b/.test(line))
      .join('\n');
  const upgrades: [string, (database: { sql: Sql }) => Promise<void>][] = [];
  for (let last = 0; last <= 7; last++) {
    upgrades.push([
      `from ${OLD_RELEASE}'s migrations up to 000${last}`,
      async ({ sql }) => migrate(drizzle(sql), { migrationsFolder: await earlierMigrations(t, OLD_RELEASE, last) }),
    ]);
  }
  upgrades.push([`from ${PUBLIC_SCHEMA_RELEASE}'s migrations and functions`, ({ sql }) => migrateAsPublicSchemaRelease(t, sql)]);
  const journal = JSON.parse(await readFile(path.join(root, 'db/migrations/meta/_journal.json'), 'utf8')) as { entries: unknown[] };
  for (const [name, earlier] of upgrades) {
    const upgraded = await emptyDatabase(t);
    await earlier(upgraded);
    await runMigrations(upgraded.url);
    t.same(await functionDefinitions(upgraded.sql), functions, `${name}: the same functions`);
    t.equal(serviceOnly(await schemaDescription(upgraded.sql)), schema, `${name}: the same schema`);
    const [recorded] = await upgraded.sql`select count(*)::int as n from paginated_collections.__drizzle_migrations`;
    t.equal(recorded!.n, journal.entries.length, `${name}: the journal holds this release's migrations`);
  }
});

t.test('a function file is applied when it changed, and only then; all changed files or none', async (t) => {
  const { url, sql } = await testDatabaseMigrated(t);
  const files = readFunctionFiles();
  t.same(await applyFunctions(sql, files, LOCK), [], 'nothing changed: nothing applied');

  // A definition changed by hand stays as it is while its file has not changed: the step compares checksums.
  const housekeep = files.find((file) => file.name === 'rate_housekeep')!;
  await sql.unsafe(housekeep.sql.replace('RETURN v_removed;', 'RETURN v_removed + 0;'));
  await runMigrations(url);
  t.match(await definitionOf(sql, 'rate_housekeep'), /v_removed \+ 0/, 'an unchanged file is not applied again');

  // The file changes: applied again, and recorded.
  const changed = files.map((file) =>
    file === housekeep ? { ...file, sql: housekeep.sql.replace('RETURN v_removed;', 'RETURN v_removed + 1;') } : file,
  );
  t.same(await applyFunctions(sql, changed, LOCK), ['rate_housekeep'], 'the changed file is applied');
  t.match(await definitionOf(sql, 'rate_housekeep'), /v_removed \+ 1/);
  t.same(await applyFunctions(sql, changed, LOCK), [], 'and then not again');

  // A broken file fails the step, and the file changed beside it is not applied either.
  const broken = [
    ...files.map((file) =>
      file === housekeep ? { ...file, sql: housekeep.sql.replace('RETURN v_removed;', 'RETURN v_removed + 2;') } : file,
    ),
    { name: 'zz_broken', sql: 'CREATE OR REPLACE FUNCTION zz_broken() RETURNS int LANGUAGE sql AS $$ select nope $$;' },
  ];
  await t.rejects(applyFunctions(sql, broken, LOCK), /nope/);
  t.match(await definitionOf(sql, 'rate_housekeep'), /v_removed \+ 1/, 'nothing of the failed step was applied');

  // The files as they are go back in on the next start.
  await runMigrations(url);
  t.match(await definitionOf(sql, 'rate_housekeep'), /RETURN v_removed;/, 'the file is applied at the next start');
});

t.test("an instance of an older release leaves a newer release's functions as they are", async (t) => {
  const { url, sql } = await testDatabaseMigrated(t);
  const journal = JSON.parse(await readFile(path.join(root, 'db/migrations/meta/_journal.json'), 'utf8')) as {
    entries: { when: number }[];
  };
  const newer = journal.entries.at(-1)!.when + 1;
  await sql`insert into paginated_collections.__drizzle_migrations (hash, created_at) values ('a newer release', ${newer})`;
  await sql.unsafe(
    readFunctionFiles()
      .find((file) => file.name === 'rate_housekeep')!
      .sql.replace('RETURN v_removed;', 'RETURN v_removed + 3;'),
  );
  await sql`delete from paginated_collections.schema_functions`;
  await runMigrations(url);
  t.match(await definitionOf(sql, 'rate_housekeep'), /v_removed \+ 3/, 'not put back');
  t.same(await sql`select name from paginated_collections.schema_functions`, [], 'nothing applied');
});

t.test('two instances migrating a new database at once do not conflict', async (t) => {
  const { url, sql } = await emptyDatabase(t);
  await Promise.all([runMigrations(url), runMigrations(url), runMigrations(url)]);
  const [migrations] = await sql`select count(*)::int as n from paginated_collections.__drizzle_migrations`;
  const journal = JSON.parse(await readFile(path.join(root, 'db/migrations/meta/_journal.json'), 'utf8')) as { entries: unknown[] };
  t.equal(migrations!.n, journal.entries.length, 'each migration applied once');
  const applied = await sql`select name from paginated_collections.schema_functions order by name`;
  t.same(
    applied.map((row) => row.name),
    readFunctionFiles().map((file) => file.name),
    'each function recorded once',
  );
});

async function testDatabaseMigrated(t: Teardown): Promise<{ url: string; sql: Sql }> {
  const database = await emptyDatabase(t);
  await runMigrations(database.url);
  return database;
}

async function definitionOf(sql: Sql, name: string): Promise<string> {
  const [row] = await sql`select pg_get_functiondef(${`paginated_collections.${name}`}::regproc) as definition`;
  return row!.definition as string;
}
