// The bench's own database `bench` (on DATABASE_URL's server, or the embedded default), holding N products.
import postgres, { type Sql } from 'postgres';
import { defaultDataDir, startEmbedded } from '../db/embedded.ts';
import { runMigrations } from '../db/migrate.ts';
import { seedWithProgress } from '../scripts/seed.ts';
import { benchPort } from './processes.ts';

const BENCH_DATABASE = 'bench';

export interface BenchDatabase {
  readonly url: string;
  /** One connection to the bench database, for setup steps and CPU readings. */
  readonly sql: Sql;
  /** Whether the Postgres server runs on this host, so its backends' CPU can be read from /proc. */
  readonly local: boolean;
  close(): Promise<void>;
}

/** DATABASE_URL's server, or the embedded default started on a port in our range. */
async function postgresServer(databaseUrl: string | undefined, log: (line: string) => void) {
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

/** Creates (once) and migrates the bench database; the caller closes it, which stops an embedded server. */
export async function openBenchDatabase(databaseUrl: string | undefined, log: (line: string) => void): Promise<BenchDatabase> {
  const server = await postgresServer(databaseUrl, log);
  try {
    await createDatabaseIfMissing(server.url, BENCH_DATABASE);
    const url = withDatabase(server.url, BENCH_DATABASE);
    await runMigrations(url);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    return {
      url,
      sql,
      local: isLocalHost(url),
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

/** Seeds `count` products unless the table already holds exactly that many: reruns skip the load. */
export async function ensureProducts(bench: BenchDatabase, count: number, log: (line: string) => void): Promise<void> {
  const [row] = await bench.sql`select count(*)::bigint as n from products`;
  if (Number(row?.n) === count) {
    log(`${BENCH_DATABASE}: products already holds ${count.toLocaleString('en')} rows; not reseeding`);
    return;
  }
  await seedWithProgress(bench.sql, 'products', count, log);
}
