// The SQL functions step (db/functions.ts): a database made fresh and one upgraded from any earlier release's
// migrations end up with the same functions and schema; a function file is applied again only when it changed,
// all changed files or none; two instances migrating at once do not conflict.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';
import t from 'tap';
import { applyFunctions, readFunctionFiles } from '../../db/functions.ts';
import { runMigrations } from '../../db/migrate.ts';
import { serverUrl, urlFor } from '../helpers/db.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
// The last commit whose migrations each carried the whole functions (0000 to 0007).
const OLD_RELEASE = '7dcc92b';
const LOCK = 7_204_119_001;

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A new, empty database on the test server, with a client; both gone when the test ends. */
async function emptyDatabase(t: Teardown): Promise<{ name: string; url: string; sql: Sql }> {
  const name = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = urlFor(name);
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  t.teardown(async () => {
    await sql.end();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
  return { name, url, sql };
}

/** The old release's migrations up to index `last`, as its files were, in a folder drizzle's migrator reads. */
async function oldMigrations(t: Teardown, last: number): Promise<string> {
  const git = (arg: string) => run('git', ['show', `${OLD_RELEASE}:${arg}`], { cwd: root, maxBuffer: 1 << 24 });
  const journal = JSON.parse((await git('db/migrations/meta/_journal.json')).stdout) as { entries: { tag: string }[] };
  journal.entries = journal.entries.slice(0, last + 1);
  const folder = await mkdtemp(path.join(tmpdir(), 'old-migrations-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  await mkdir(path.join(folder, 'meta'));
  await writeFile(path.join(folder, 'meta', '_journal.json'), JSON.stringify(journal));
  for (const { tag } of journal.entries) {
    await writeFile(path.join(folder, `${tag}.sql`), (await git(`db/migrations/${tag}.sql`)).stdout);
  }
  return folder;
}

/** Every function of schema public, as PostgreSQL prints its definition. */
async function functionDefinitions(sql: Sql): Promise<Record<string, string>> {
  const rows = await sql<{ signature: string; definition: string }[]>`
    select p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as signature,
           pg_get_functiondef(p.oid) as definition
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public' order by 1`;
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
  t.match(schema, /^function CREATE OR REPLACE FUNCTION public\.rate_decide\(/m, 'the description holds the functions');
  t.match(schema, /^index CREATE UNIQUE INDEX \S+ ON public\.rate_windows /m, 'and the indexes');
  t.match(schema, /^relation public\.rate_windows kind r persistence p options \{[^}]*fillfactor=50/m, 'and the tables with their options');

  for (let last = 0; last <= 7; last++) {
    const upgraded = await emptyDatabase(t);
    await migrate(drizzle(upgraded.sql), { migrationsFolder: await oldMigrations(t, last) });
    await runMigrations(upgraded.url);
    t.same(await functionDefinitions(upgraded.sql), functions, `from ${OLD_RELEASE}'s migrations up to 000${last}: the same functions`);
    t.equal(await schemaDescription(upgraded.sql), schema, `from ${OLD_RELEASE}'s migrations up to 000${last}: the same schema`);
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
  await sql`insert into drizzle.__drizzle_migrations (hash, created_at) values ('a newer release', ${newer})`;
  await sql.unsafe(
    readFunctionFiles()
      .find((file) => file.name === 'rate_housekeep')!
      .sql.replace('RETURN v_removed;', 'RETURN v_removed + 3;'),
  );
  await sql`delete from drizzle.schema_functions`;
  await runMigrations(url);
  t.match(await definitionOf(sql, 'rate_housekeep'), /v_removed \+ 3/, 'not put back');
  t.same(await sql`select name from drizzle.schema_functions`, [], 'nothing applied');
});

t.test('two instances migrating a new database at once do not conflict', async (t) => {
  const { url, sql } = await emptyDatabase(t);
  await Promise.all([runMigrations(url), runMigrations(url), runMigrations(url)]);
  const [migrations] = await sql`select count(*)::int as n from drizzle.__drizzle_migrations`;
  const journal = JSON.parse(await readFile(path.join(root, 'db/migrations/meta/_journal.json'), 'utf8')) as { entries: unknown[] };
  t.equal(migrations!.n, journal.entries.length, 'each migration applied once');
  const applied = await sql`select name from drizzle.schema_functions order by name`;
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
  const [row] = await sql`select pg_get_functiondef(${name}::regproc) as definition`;
  return row!.definition as string;
}
