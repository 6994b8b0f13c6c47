// `npm run seed -- --products N --orders N --events N`: replaces the named demo collections with N generated rows each.
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import postgres from 'postgres';
import { resolveDatabaseUrl } from '../db/embedded.ts';
import { migrateDemo } from '../demo/migrate.ts';
import { type SeedTable, seedTable, seedTables } from '../demo/seed.ts';

const USAGE = 'Usage: npm run seed -- [--products N] [--orders N] [--events N]   (N: a whole number of rows, 0 or more)';

class UsageError extends Error {}

/** The row count of each named collection, in the order given; throws one readable UsageError. */
export function parseSeedArgs(args: string[]): [SeedTable, number][] {
  let values: Record<string, string | undefined>;
  try {
    const options = Object.fromEntries(seedTables.map((table) => [table, { type: 'string' as const }]));
    ({ values } = parseArgs({ args, options, strict: true, allowPositionals: false }) as { values: Record<string, string | undefined> });
  } catch (error) {
    // node's messages are long and name internals; keep the first sentence.
    throw new UsageError(`Invalid arguments: ${(error as Error).message.split(/\.(?:\s|$)/)[0]}`);
  }
  const counts: [SeedTable, number][] = [];
  for (const table of seedTables) {
    const value = values[table];
    if (value === undefined) continue;
    if (!/^\d{1,10}$/.test(value.replaceAll('_', ''))) {
      throw new UsageError(`Invalid --${table}: expected a whole number of rows, got "${value}"`);
    }
    counts.push([table, Number(value.replaceAll('_', ''))]);
  }
  if (counts.length === 0) throw new UsageError('Nothing to seed: name at least one collection');
  return counts;
}

function progressBar(): cliProgress.SingleBar {
  return new cliProgress.SingleBar(
    {
      format: '{table} [{bar}] {value}/{total} rows | {rate} rows/s | ETA {eta_formatted}{phase}',
      hideCursor: true,
      etaBuffer: 50,
    },
    cliProgress.Presets.shades_classic,
  );
}

/** seedTable with a progress bar (rows done / total, rate, ETA) and a closing line; also used by the bench. */
export async function seedWithProgress(
  sql: postgres.Sql,
  table: SeedTable,
  count: number,
  log: (line: string) => void = console.log,
): Promise<void> {
  const bar = progressBar();
  const started = performance.now();
  const rate = (done: number) => Math.round(done / Math.max((performance.now() - started) / 1000, 1e-3)).toLocaleString('en');
  bar.start(count, 0, { table, rate: '0', phase: '' });
  // Once every row is sent, seedTable still builds the indexes: say so rather than sit at 100%.
  const phase = (done: number) => (done === count ? ' | building indexes' : '');
  try {
    await seedTable(sql, table, count, (done) => bar.update(done, { rate: rate(done), phase: phase(done) }));
  } finally {
    bar.stop();
  }
  const seconds = (performance.now() - started) / 1000;
  // The bar (on stderr) is invisible when that is not a terminal; this line always tells what happened.
  log(`${table}: ${count.toLocaleString('en')} rows in ${seconds.toFixed(1)} s`);
}

async function main(): Promise<void> {
  let counts: [SeedTable, number][];
  try {
    counts = parseSeedArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${error.message}\n${USAGE}`);
    process.exit(2);
  }
  const server = await resolveDatabaseUrl(process.env.DATABASE_URL || undefined, (line) => console.log(line));
  try {
    await migrateDemo(server.url);
    const sql = postgres(server.url, { max: 1, onnotice: () => {} });
    try {
      for (const [table, count] of counts) await seedWithProgress(sql, table, count);
    } finally {
      await sql.end();
    }
  } finally {
    await server.stop();
  }
}

// Run only as a script: the bench imports seedWithProgress from here.
// A failure (no database to reach, an embedded PostgreSQL that cannot start) is one line, not a stack trace.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main().catch((error: unknown) => {
    console.error(`Could not seed: ${(error as Error).message || String(error)}`);
    process.exit(1);
  });
}
