// The bench's own database `bench` (on DATABASE_URL's server, or the embedded default), holding N products.
import postgres, { type Sql } from 'postgres';
import { defaultDataDir, startEmbedded } from '../db/embedded.ts';
import { runMigrations } from '../db/migrate.ts';
import { migrateDemo } from '../demo/migrate.ts';
import { seedTable } from '../demo/seed.ts';
import { seedWithProgress } from '../scripts/seed.ts';
import { postmasterOf } from './cpu.ts';
import { benchPort } from './processes.ts';

const BENCH_DATABASE = 'bench';

export interface BenchDatabase {
  readonly url: string;
  /** One connection to the bench database, for setup steps and CPU readings. */
  readonly sql: Sql;
  /**
   * The pid of the postmaster of the cluster holding the bench database, when that cluster runs on this host
   * (postmasterOf in bench/cpu.ts): its backends' CPU is read from /proc, and no other cluster's processes.
   */
  readonly postmaster: number | undefined;
  close(): Promise<void>;
}

/** DATABASE_URL's server, or the embedded default started on a port in our range. */
export async function postgresServer(databaseUrl: string | undefined, log: (line: string) => void) {
  if (databaseUrl) return { url: databaseUrl, stop: async () => {} };
  log(`DATABASE_URL is not set: starting the embedded PostgreSQL in ${defaultDataDir}`);
  return startEmbedded({ dataDir: defaultDataDir, port: await benchPort() });
}

async function createDatabaseIfMissing(serverUrl: string, name: string): Promise<void> {
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await admin`select 1 as found from pg_database where datname = ${name}`;
    if (!row) await admin.unsafe(`create database ${name}`);
  } catch (error) {
    // Another bench run created it between the check and the create.
    if ((error as { code?: string }).code !== '42P04') throw error;
  } finally {
    await admin.end();
  }
}

function withDatabase(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

function isLocalHost(url: string): boolean {
  const host = new URL(url).hostname;
  return host === '' || host === 'localhost' || host === '127.0.0.1' || host === '[::1]';
}

/**
 * The database of a bench of `products` products: `bench` for the usual million, `bench_<products>` for the
 * other sizes (`--sizes`), so that no size reseeds another's table.
 */
export function benchDatabaseName(products: number): string {
  return products === 1_000_000 ? BENCH_DATABASE : `${BENCH_DATABASE}_${products}`;
}

/** Creates (once) and migrates the bench database; the caller closes it, which stops an embedded server. */
export async function openBenchDatabase(
  databaseUrl: string | undefined,
  log: (line: string) => void,
  name = BENCH_DATABASE,
): Promise<BenchDatabase> {
  const server = await postgresServer(databaseUrl, log);
  try {
    await createDatabaseIfMissing(server.url, name);
    const url = withDatabase(server.url, name);
    await runMigrations(url);
    await migrateDemo(url);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    const postmaster = isLocalHost(url) ? await postmasterOf(sql) : undefined;
    if (postmaster === undefined) log(`${name}: no PostgreSQL process of its cluster found on this host: pg µs/req reads n/a`);
    return {
      url,
      sql,
      postmaster,
      close: async () => {
        await sql.end({ timeout: 5 });
        await server.stop();
      },
    };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/**
 * Seeds `count` products unless the table already holds exactly that many: reruns skip the load. Returns
 * the seconds the seeding took, or undefined when it was skipped.
 */
export async function ensureProducts(bench: BenchDatabase, count: number, log: (line: string) => void): Promise<number | undefined> {
  const [row] = await bench.sql`select count(*)::bigint as n from demo.products`;
  const database = new URL(bench.url).pathname.slice(1);
  if (Number(row?.n) === count) {
    log(`${database}: products already holds ${count.toLocaleString('en')} rows; not reseeding`);
    return undefined;
  }
  const started = performance.now();
  await seedWithProgress(bench.sql, 'products', count, log);
  return (performance.now() - started) / 1000;
}

/**
 * The tables the rows read and write: the products, the limiter's state and keys, the floor's counters
 * and the peer's store. Those that exist are vacuumed and analysed before every row is measured.
 */
const MEASURED_TABLES = ['products', 'rate_windows', 'rate_tiers', 'api_keys', 'bench_floor_counters', 'bench_rlflx'];

/**
 * VACUUM (ANALYZE) of the measured tables. Where autovacuum is off (it is a server setting), nothing else
 * removes the dead rows the limiter's updates leave: a long-lived bench database's `rate_windows` grew to
 * hundreds of megabytes for one live row, and every row measured after that paid for scanning them.
 */
export async function vacuumMeasured(sql: Sql): Promise<void> {
  const rows = await sql`select name from unnest(${MEASURED_TABLES}::text[]) as name where to_regclass(name) is not null`;
  if (rows.length > 0) await sql.unsafe(`vacuum (analyze) ${rows.map((row) => row.name as string).join(', ')}`);
}

/**
 * Seconds to seed `count` products as `npm run seed -- --products <count>` does once the migrations ran
 * (COPY into a copy of the table, the indexes built, the copy swapped in), measured in a scratch database
 * created for it and dropped after, so the bench database's products are left alone.
 */
export async function measureSeeding(bench: BenchDatabase, count: number): Promise<number> {
  const name = `bench_seed_${process.pid}`;
  await bench.sql.unsafe(`drop database if exists ${name}`);
  await bench.sql.unsafe(`create database ${name}`);
  try {
    const url = withDatabase(bench.url, name);
    await runMigrations(url);
    await migrateDemo(url);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const started = performance.now();
      await seedTable(sql, 'products', count);
      return (performance.now() - started) / 1000;
    } finally {
      await sql.end({ timeout: 5 });
    }
  } finally {
    await bench.sql.unsafe(`drop database if exists ${name} with (force)`);
  }
}
