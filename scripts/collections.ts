// `npm run --silent collections -- <command>`: the operator's tools for the collections file (docs/collections.md, "Tools").
//   init [--schema NAME]...  prints a starting file for DATABASE_URL's database (schema public unless named)
//   check [FILE]             checks FILE (default: COLLECTIONS) against DATABASE_URL's database and reports,
//                            for each sort and filter, the index that serves it or what it costs without one
// Output is the file (init) or the report (check) on stdout; every error is one line on stderr, with exit code 1.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import postgres, { type Sql } from 'postgres';
import { parse as parseYaml } from 'yaml';
import { databaseIdentity } from '../db/identity.ts';
import { SERVICE_SCHEMA } from '../db/service-schema.ts';
import { readCatalog } from '../lib/catalog/read.ts';
import { schemaNames } from '../lib/catalog/schemas.ts';
import { initFile } from '../lib/collections/init.ts';
import { parseCollectionsFile } from '../lib/collections/parse.ts';
import { CollectionsFileError } from '../lib/collections/problems.ts';
import { checkReport } from '../lib/collections/report.ts';
import { resolveCollections } from '../lib/collections/resolve.ts';

const USAGE = [
  'Usage: npm run --silent collections -- <command>',
  "  init [--schema NAME]...   print a starting collections file for DATABASE_URL's database (schema public unless named;",
  '                            --schema again for more): npm run --silent collections -- init > collections.yaml',
  "  check [FILE]              check FILE (default: the COLLECTIONS variable) against DATABASE_URL's database: which index",
  '                            serves each sort and filter, or what it costs without one; exit code 1 when it cannot be served',
].join('\n');

/** A failure told in one line on stderr (exit code 1), with no stack trace. */
class CliError extends Error {}

async function main(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [command, ...rest] = args;
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (command === 'init') return init(rest, env);
  if (command === 'check') return check(rest, env);
  throw new CliError(
    `${command === undefined ? 'No command' : `Unknown command ${JSON.stringify(command)}`}: expected init or check (npm run --silent collections -- help)`,
  );
}

function options(command: string, args: readonly string[], schema: boolean) {
  try {
    return parseArgs({
      args: [...args],
      options: schema ? { schema: { type: 'string', multiple: true } } : {},
      strict: true,
      allowPositionals: !schema,
    });
  } catch (error) {
    // node's messages name internals after the first sentence.
    throw new CliError(`Invalid arguments to ${command}: ${(error as Error).message.split(/\.(?:\s|$)/)[0]}`);
  }
}

async function init(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = options('init', args, true);
  const schemas = [...new Set((values.schema as string[] | undefined) ?? ['public'])];
  const text = await withDatabase('init', env, async (sql) => {
    const existing = await schemaNames(sql);
    for (const schema of schemas) {
      if (schema === SERVICE_SCHEMA) throw new CliError(`Schema ${schema} is the service's own: it holds no collections`);
      if (existing.includes(schema)) continue;
      const near = existing.find((name) => name.toLowerCase() === schema.toLowerCase());
      throw new CliError(`No schema ${JSON.stringify(schema)} in the database${near === undefined ? '' : ` (did you mean ${near}?)`}`);
    }
    return initFile(await readCatalog(sql, { schemas, serviceSchema: SERVICE_SCHEMA }));
  });
  process.stdout.write(text);
  // The file is printed all the same: its comments say what was left out and why, and hold the views.
  if ((parseYaml(text) as { collections: unknown[] }).collections.length === 0) {
    const where = `schema${schemas.length === 1 ? '' : 's'} ${schemas.join(', ')}`;
    throw new CliError(`No table of ${where} has a usable key: the file lists no collection (its comments say why; --schema names others)`);
  }
  return 0;
}

async function check(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { positionals } = options('check', args, false);
  if (positionals.length > 1) throw new CliError(`check takes one file, got ${positionals.length}`);
  const file = positionals[0] ?? nonEmpty(env.COLLECTIONS);
  if (file === undefined) {
    throw new CliError(
      'No collections file: name it (npm run --silent collections -- check collections.yaml) or set COLLECTIONS; ' +
        'init writes one (npm run --silent collections -- init > collections.yaml)',
    );
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    throw new CliError(`Cannot read collections file ${file}: ${code === 'ENOENT' ? 'no such file' : message}`);
  }
  let parsed: ReturnType<typeof parseCollectionsFile>;
  try {
    parsed = parseCollectionsFile(text, file);
  } catch (error) {
    if (!(error instanceof CollectionsFileError)) throw error;
    return cannotServe(file, error.problems);
  }
  const catalog = await withDatabase('check', env, (sql) => readCatalog(sql, { serviceSchema: SERVICE_SCHEMA }));
  const { collections, problems } = resolveCollections(parsed, catalog, file);
  const report = checkReport(collections);
  if (report.length > 0) process.stdout.write(`${report.join('\n')}\n`);
  if (problems.length > 0) return cannotServe(file, problems);
  const count = `${collections.length} collection${collections.length === 1 ? '' : 's'}`;
  process.stdout.write(`${file} can be served: ${count}\n`);
  return 0;
}

function cannotServe(file: string, problems: readonly string[]): number {
  process.stderr.write(`${problems.join('\n')}\n`);
  process.stderr.write(`${file} cannot be served: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n`);
  return 1;
}

/** Runs `work` on a one-connection client of DATABASE_URL, closed after; a connection failure is a CliError. */
async function withDatabase<T>(command: string, env: NodeJS.ProcessEnv, work: (sql: Sql) => Promise<T>): Promise<T> {
  const url = nonEmpty(env.DATABASE_URL);
  if (url === undefined) {
    throw new CliError(
      `DATABASE_URL is not set: ${command} reads the catalog of the database it names (DATABASE_URL=postgres://user@host:5432/dbname)`,
    );
  }
  let identity: string;
  try {
    if (!['postgres:', 'postgresql:'].includes(new URL(url).protocol)) throw new TypeError('not postgres');
    identity = databaseIdentity(url);
  } catch {
    throw new CliError('Invalid DATABASE_URL: expected a postgres:// or postgresql:// URL');
  }
  const sql = postgres(url, { max: 1, connect_timeout: 10, onnotice: () => {} });
  try {
    return await work(sql);
  } catch (error) {
    if (error instanceof CliError) throw error;
    const { message, code } = error as NodeJS.ErrnoException;
    const reason = code === 'ECONNREFUSED' ? 'connection refused' : message.split('\n')[0];
    throw new CliError(`Cannot read the catalog of ${identity}: ${reason}`);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

try {
  // exitCode, not exit(): stdout may be a pipe, written asynchronously, that exit() would cut short.
  process.exitCode = await main(process.argv.slice(2), process.env);
} catch (error) {
  if (!(error instanceof CliError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exitCode = 1;
}
