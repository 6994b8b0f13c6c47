// `npm test`: installs the Debian packages the tests drive when missing, runs tap against DATABASE_URL (or an
// embedded PostgreSQL when none is set), and ends with one plain summary line ("N passed, N failed").

import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import postgres from 'postgres';
import { type EmbeddedServer, startEmbedded } from '../db/embedded.ts';
import { TEMPLATE_PREFIX } from '../tests/helpers/db.ts';

// The Debian packages the tests drive (Chromium, PgBouncer, HAProxy, …): installed when missing, as root;
// otherwise what to install is named and nothing runs, rather than tests failing one by one.
const packages = spawnSync('bash', [fileURLToPath(new URL('./test-packages.sh', import.meta.url))], { stdio: 'inherit' });
if (packages.status !== 0) process.exit(packages.status ?? 1);

let embedded: EmbeddedServer | undefined;
if (!process.env.DATABASE_URL) {
  try {
    embedded = await startEmbedded({
      dataDir: fileURLToPath(new URL('../.data/test-postgres', import.meta.url)),
      log: (line) => console.log(`DATABASE_URL is not set: testing against an ${line}`),
    });
  } catch (error) {
    console.error(`Could not start the embedded PostgreSQL: ${(error as Error).message}`);
    process.exit(1);
  }
}
// Every Node process of the suite (test files, the servers and tools they start) preloads a module hook that
// spares Node re-reading drizzle-orm's large package.json for each of its files (tests/helpers/drizzle-format.mjs).
const drizzleFormat = fileURLToPath(new URL('../tests/helpers/drizzle-format.mjs', import.meta.url));
// Every one of them, and each server a test starts (tests/helpers/processes.ts, childEnv), shares one compile
// cache: the suite starts some hundreds of Node processes over the same TypeScript, and each would strip and
// compile it again. Node checks each entry against its file's content.
const env = {
  ...process.env,
  NODE_COMPILE_CACHE:
    process.env.NODE_COMPILE_CACHE ?? fileURLToPath(new URL('../node_modules/.cache/node-compile-cache', import.meta.url)),
  DATABASE_URL: process.env.DATABASE_URL ?? embedded!.url,
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import "${drizzleFormat}"`.trim(),
};

// tap lets the test files that run finish when it is signalled, which can take minutes. It gets a
// process group of its own, so that a stop signal reaches it, its test processes and the servers they
// started all at once; whatever is left after 5 s is killed.
const tap = spawn(fileURLToPath(new URL('../node_modules/.bin/tap', import.meta.url)), process.argv.slice(2), {
  stdio: ['ignore', 'pipe', 'inherit'],
  env,
  detached: true,
});
function stopTests(signal: NodeJS.Signals): void {
  const group = (to: NodeJS.Signals) => {
    try {
      process.kill(-tap.pid!, to);
    } catch {
      // the group is gone already
    }
  };
  group(signal);
  setTimeout(() => group('SIGKILL'), 5000).unref();
}
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, stopTests);
let tail = '';
tap.stdout.on('data', (chunk: Buffer) => {
  process.stdout.write(chunk);
  tail = (tail + chunk.toString()).slice(-4096);
});
const code = await new Promise<number>((resolve) => tap.on('close', (status) => resolve(status ?? 1)));
await dropTemplates(env.DATABASE_URL);
await embedded?.stop();

// tap's closing line is "# { total: 30, pass: 29, fail: 1 }"; restate it plainly for CI.
const summary = /# \{([^}]*)\}\s*$/m.exec(stripVTControlCharacters(tail))?.[1] ?? '';
const count = (key: string) => Number(new RegExp(`${key}: (\\d+)`).exec(summary)?.[1] ?? 0);
console.log(`Tests: ${count('pass')} passed, ${count('fail')} failed`);
process.exit(code !== 0 ? code : count('pass') === 0 ? 1 : 0);

/** Drops the migrated databases the tests copied theirs from (tests/helpers/db.ts, testDatabase): the suite's, not the server's. */
async function dropTemplates(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const templates = await sql<{ datname: string }[]>`select datname from pg_database where starts_with(datname, ${TEMPLATE_PREFIX})`;
    for (const { datname } of templates) await sql.unsafe(`drop database if exists ${datname} with (force)`);
  } catch (error) {
    console.error(`Could not drop the tests' template databases: ${(error as Error).message}`);
  } finally {
    await sql.end({ timeout: 1 });
  }
}
