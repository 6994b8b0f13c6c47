// `npm run --silent collections -- <command>`: the operator's tools for the collections file (docs/reference/collections-file.md, "Tools").
//   init [--schema NAME]...  prints a starting file for DATABASE_URL's database (schema public unless named)
//   check [FILE]             checks FILE (default: COLLECTIONS) against DATABASE_URL's database and reports,
//                            for each sort and filter, the index that serves it or what it costs without one (and,
//                            with row rules, the index to create); a key the file names, that no unique index
//                            vouches for, tested for uniqueness where the rows are few enough to count; warnings
//                            of what it serves by default on stderr
//   walk [FILE] --url URL    walks every collection of FILE through the service at URL, in each variant, to the end,
//                            and compares the items' keys with a SELECT of the relation on DATABASE_URL (with row
//                            rules, of the rows the claims of --key-id's key choose, read with ADMIN_TOKEN)
// Output is the file (init) or the report (check, walk) on stdout; every error is one line on stderr, with exit code 1.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import postgres, { type Sql } from 'postgres';
import { parse as parseYaml } from 'yaml';
import { createClient } from '../client/index.ts';
import { databaseIdentity } from '../db/identity.ts';
import { SERVICE_SCHEMA } from '../db/service-schema.ts';
import { parsePostgresUrl } from '../db/url.ts';
import { readCatalog } from '../lib/catalog/read.ts';
import { schemaNames } from '../lib/catalog/schemas.ts';
import { initFile } from '../lib/collections/init.ts';
import { parseCollectionsFile } from '../lib/collections/parse.ts';
import { CollectionsFileError, problemLine } from '../lib/collections/problems.ts';
import { checkReport } from '../lib/collections/report.ts';
import { type Resolution, resolveCollections } from '../lib/collections/resolve.ts';
import { keyLine, keyToTest, testKey } from './collections-keys.ts';
import { walkCollections } from './collections-walk.ts';

const USAGE = [
  'Usage: npm run --silent collections -- <command>',
  "  init [--schema NAME]...   print a starting collections file for DATABASE_URL's database (schema public unless named;",
  '                            --schema again for more): npm run --silent collections -- init > collections.yaml',
  "  check [FILE]              check FILE (default: the COLLECTIONS variable) against DATABASE_URL's database: which index",
  '                            serves each sort and filter, or what it costs without one, and whether a key the file names is',
  '                            unique (where the rows are few enough to count); exit code 1 when it cannot be served',
  '  walk [FILE] --url URL [--key KEY [--key-id ID]]',
  '                            walk every collection of FILE through the service at URL to the end, in each variant it',
  "                            offers, and compare the items' keys with a SELECT of the relation on DATABASE_URL: every",
  '                            row exactly once; exit code 1 on any mismatch. --key: an API key to walk on its tier;',
  "                            --key-id: its id, whose claims (read with ADMIN_TOKEN) choose a row-ruled collection's rows",
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
  if (command === 'walk') return walk(rest, env);
  throw new CliError(
    `${command === undefined ? 'No command' : `Unknown command ${JSON.stringify(command)}`}: expected init, check or walk (npm run --silent collections -- help)`,
  );
}

const COMMAND_OPTIONS = {
  init: { schema: { type: 'string', multiple: true } },
  check: {},
  walk: { url: { type: 'string' }, key: { type: 'string' }, 'key-id': { type: 'string' } },
} as const;

function options<C extends keyof typeof COMMAND_OPTIONS>(command: C, args: readonly string[]) {
  try {
    return parseArgs({ args: [...args], options: COMMAND_OPTIONS[command], strict: true, allowPositionals: command !== 'init' });
  } catch (error) {
    // node's messages name internals after the first sentence.
    throw new CliError(`Invalid arguments to ${command}: ${(error as Error).message.split(/\.(?:\s|$)/)[0]}`);
  }
}

async function init(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = options('init', args);
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
  const { positionals } = options('check', args);
  const file = fileOf('check', positionals, env);
  const resolved = await resolveFile('check', file, env);
  if (resolved.collections === undefined) return cannotServe(file, resolved.problems);
  const { collections, warnings } = resolved;
  // A key the file names that no unique index vouches for: tested against the rows, where there are few enough to count.
  const problems = [...resolved.problems];
  const keyLines = new Map<string, string>();
  const tested = collections.filter(keyToTest);
  if (tested.length > 0) {
    await withDatabase('check', env, async (sql) => {
      for (const collection of tested) {
        const test = await testKey(sql, collection);
        if (test.outcome === 'not unique') problems.push(problemLine(file, collection.name, test.problem));
        const line = keyLine(test);
        if (line !== undefined) keyLines.set(collection.name, line);
      }
    });
  }
  const report = checkReport(collections, keyLines);
  if (report.length > 0) process.stdout.write(`${report.join('\n')}\n`);
  // Served all the same: a column named as a secret, a collection without a columns list (lib/collections/safe-defaults.ts).
  if (warnings.length > 0) process.stderr.write(`${warnings.join('\n')}\n`);
  if (problems.length > 0) return cannotServe(file, problems);
  const count = `${collections.length} collection${collections.length === 1 ? '' : 's'}`;
  process.stdout.write(`${file} can be served: ${count}\n`);
  return 0;
}

async function walk(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { positionals, values } = options('walk', args);
  const file = fileOf('walk', positionals, env);
  const url = values.url;
  if (url === undefined) throw new CliError('walk needs the service to walk: --url http://host:port');
  let origin: string;
  try {
    const parsed = new URL(url);
    if (!['http:', 'https:'].includes(parsed.protocol)) throw new TypeError('not http');
    // A path is kept: a service behind a proxy may live under one (PUBLIC_URL).
    origin = `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
  } catch {
    throw new CliError(`Invalid --url ${JSON.stringify(url)}: expected the service's http:// or https:// URL`);
  }
  const key = values.key;
  const keyId = values['key-id'];
  if (keyId !== undefined && key === undefined) throw new CliError('--key-id names the key --key gives: give --key too');
  const adminToken = nonEmpty(env.ADMIN_TOKEN);
  if (keyId !== undefined && adminToken === undefined) {
    throw new CliError("--key-id: walk reads the key's claims through the operator API (GET /admin/keys/{id}): set ADMIN_TOKEN");
  }
  const resolved = await resolveFile('walk', file, env);
  if (resolved.collections === undefined || resolved.problems.length > 0) return cannotServe(file, resolved.problems);
  const claims = keyId === undefined ? undefined : await keyClaims(origin, keyId, key!, adminToken!);
  const served = await servedCollections(origin, key);
  // What the service does not list for this client: a collection it reads only with credentials, or one this key may
  // not read, is not walked (and said so); any other is a service serving another file.
  const skip = new Map<string, string>();
  const absent: string[] = [];
  for (const collection of resolved.collections) {
    if (served.has(collection.name)) continue;
    const { rows, anonymous } = collection.access;
    if (key !== undefined)
      skip.set(collection.name, 'the service does not list it for this key (its collections, or the claims its row rules need)');
    else if (rows.length > 0 || !anonymous) {
      skip.set(
        collection.name,
        `only clients with credentials read it${rows.length > 0 ? ', each its own rows (access.rows)' : ''}: walk with --key`,
      );
    } else absent.push(collection.name);
  }
  if (absent.length > 0) throw new CliError(`The service at ${origin} does not serve ${absent.join(', ')} (is it serving ${file}?)`);
  const outcome = await withDatabase('walk', env, (sql) =>
    walkCollections(sql, resolved.collections, {
      url: origin,
      ...(key === undefined ? {} : { apiKey: key }),
      ...(claims === undefined ? {} : { claims }),
      skip,
      write: (line) => process.stdout.write(`${line}\n`),
    }),
  );
  const walked = resolved.collections.length - outcome.notWalked;
  const count = `${walked} collection${walked === 1 ? '' : 's'}`;
  const unwalked = outcome.notWalked === 0 ? '' : `; ${outcome.notWalked} not walked`;
  const found = outcome.ok ? 'every key exactly once' : 'with mismatches';
  process.stdout.write(`${file}: ${count} walked, ${found}${unwalked}\n`);
  return outcome.ok && outcome.notWalked === 0 ? 0 : 1;
}

/**
 * The claims of the key `keyId`, from the operator API (GET /admin/keys/{id}): what the service compares a
 * collection's row rules with. The key must be the one `key` gives (its prefix) and not revoked.
 */
async function keyClaims(origin: string, keyId: string, key: string, adminToken: string): Promise<Readonly<Record<string, unknown>>> {
  const where = `GET /admin/keys/${keyId}`;
  let response: Response;
  try {
    response = await fetch(`${origin}/admin/keys/${encodeURIComponent(keyId)}`, { headers: { authorization: `Bearer ${adminToken}` } });
  } catch (error) {
    const { cause, message } = error as Error & { cause?: NodeJS.ErrnoException };
    throw new CliError(
      `Cannot reach the service at ${origin}: ${cause?.code === 'ECONNREFUSED' ? 'connection refused' : (cause?.message ?? message)}`,
    );
  }
  if (response.status === 404) throw new CliError(`No key ${keyId} at the service (${where}: 404; is ADMIN_TOKEN set there?)`);
  if (response.status === 401 || response.status === 403) {
    throw new CliError(`ADMIN_TOKEN is not the operator token of the service at ${origin} (${where}: ${response.status})`);
  }
  if (!response.ok) throw new CliError(`${where}: ${response.status}`);
  const shown = (await response.json()) as { prefix: string; claims: Record<string, unknown>; revokedAt?: string };
  if (!key.startsWith(shown.prefix)) throw new CliError(`--key-id ${keyId} is not the key --key gives (its prefix is ${shown.prefix})`);
  if (shown.revokedAt !== undefined) throw new CliError(`The key ${keyId} was revoked at ${shown.revokedAt}`);
  return shown.claims;
}

/** The collections the service lists under /v1; one that cannot be reached is a CliError. */
async function servedCollections(origin: string, key: string | undefined): Promise<Set<string>> {
  const client = createClient({ baseUrl: origin, ...(key === undefined ? {} : { apiKey: key }) });
  let index: { _links?: Record<string, unknown> };
  try {
    index = (await client.get('/v1')) as typeof index;
  } catch (error) {
    const { cause, message } = error as Error & { cause?: NodeJS.ErrnoException };
    const reason = cause?.code === 'ECONNREFUSED' ? 'connection refused' : (cause?.message ?? message);
    throw new CliError(`Cannot reach the service at ${origin}: ${reason}`);
  }
  return new Set(Object.keys(index._links ?? {}).filter((name) => name !== 'self'));
}

/** The file named on the command line, else COLLECTIONS; a CliError saying how to name one without either. */
function fileOf(command: string, positionals: readonly string[], env: NodeJS.ProcessEnv): string {
  if (positionals.length > 1) throw new CliError(`${command} takes one file, got ${positionals.length}`);
  const file = positionals[0] ?? nonEmpty(env.COLLECTIONS);
  if (file === undefined) {
    throw new CliError(
      `No collections file: name it (npm run --silent collections -- ${command} collections.yaml) or set COLLECTIONS; ` +
        'init writes one (npm run --silent collections -- init > collections.yaml)',
    );
  }
  return file;
}

/**
 * The file read, parsed and resolved against DATABASE_URL's catalog, as start-up does it: its collections and
 * problems, or only the problems of a file whose shape is wrong (nothing to resolve then).
 */
async function resolveFile(
  command: string,
  file: string,
  env: NodeJS.ProcessEnv,
): Promise<Resolution | { collections: undefined; problems: readonly string[] }> {
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
    return { collections: undefined, problems: error.problems };
  }
  const catalog = await withDatabase(command, env, (sql) => readCatalog(sql, { serviceSchema: SERVICE_SCHEMA }));
  return resolveCollections(parsed, catalog, file);
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
    // A host list too (host1:5432,host2:5432), as the service takes it (db/url.ts).
    if (!['postgres:', 'postgresql:'].includes(parsePostgresUrl(url).protocol)) throw new TypeError('not postgres');
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
