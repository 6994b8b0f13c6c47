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

/** pg_dump --schema-only, without what differs between two databases of the same schema. */
async function schemaDump(url: string, name: string): Promise<string> {
  const { stdout } = await run('pg_dump', ['--schema-only', '--dbname', url], { maxBuffer: 1 << 24 });
  return stdout
    .split('\n')
    .filter((line) => !/^\\(un)?restrict /.test(line)) // a random key per dump (pg_dump 15.14 and later)
    .join('\n')
    .replaceAll(name, '<database>');
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
  const schema = await schemaDump(fresh.url, fresh.name);
  t.match(schema, /CREATE FUNCTION public\.rate_decide\(/, 'the dump holds the functions');

  for (let last = 0; last <= 7; last++) {
    const upgraded = await emptyDatabase(t);
    await migrate(drizzle(upgraded.sql), { migrationsFolder: await oldMigrations(t, last) });
    await runMigrations(upgraded.url);
    t.same(await functionDefinitions(upgraded.sql), functions, `from ${OLD_RELEASE}'s migrations up to 000${last}: the same functions`);
    t.equal(await schemaDump(upgraded.url, upgraded.name), schema, `from ${OLD_RELEASE}'s migrations up to 000${last}: the same schema`);
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
