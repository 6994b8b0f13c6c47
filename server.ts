// Entry point: read the config, open the database, build the app, serve, shut down cleanly.
import type { Server } from 'node:http';
import postgres, { type Sql } from 'postgres';
import { openDatabase } from './db/client.ts';
import { resolveDatabaseUrl } from './db/embedded.ts';
import { runMigrations } from './db/migrate.ts';
import { defaultSizes, seedIfEmpty } from './db/seed.ts';
import { buildApp } from './lib/http/app.ts';
import { type Config, ConfigError, parseConfig } from './lib/http/config.ts';
import { httpServer } from './lib/http/listener.ts';
import { gracefulShutdown } from './lib/http/shutdown.ts';
import { loadCursorSecret } from './lib/pagination/cursor-secret.ts';
import { demoRegistry } from './lib/pagination/demo-collections.ts';

const log = (line: string) => console.log(line);

function readConfig(): Config {
  try {
    return parseConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
}

/** A start-up failure as the one line an operator reads: a stack trace tells them nothing more. */
function describeFailure(error: unknown, port: number): string {
  const { code, syscall, message } = error as NodeJS.ErrnoException;
  if (syscall === 'listen' && code === 'EADDRINUSE') return `port ${port} is in use: set PORT to a free one`;
  if (syscall === 'listen' && code === 'EACCES') return `port ${port} needs privileges: set PORT to 1024 or above`;
  // postgres.js reports a refused connection to "localhost" as an AggregateError with no message.
  return message || code || String(error);
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * One warning line when the PostgreSQL server runs with autovacuum off (a server setting, not one of a
 * database): the rate limiter rewrites a row of `rate_windows` on every request, and without autovacuum
 * nothing removes the dead versions, so the table and every decision's work keep growing
 * (docs/operations.md, "Autovacuum").
 */
async function warnWithoutAutovacuum(sql: Sql): Promise<void> {
  const [row] = await sql`select current_setting('autovacuum') as autovacuum`;
  if (row?.autovacuum !== 'on') {
    log(
      `Warning: autovacuum is ${row?.autovacuum ?? 'unknown'} on this PostgreSQL server; the rate limiter's table rate_windows needs it, or its dead rows pile up and slow every request (docs/operations.md, "Autovacuum")`,
    );
  }
}

/** Everything up to listening; resolves to what a stop signal should run. */
async function start(config: Config) {
  const postgresServer = await resolveDatabaseUrl(config.databaseUrl, log);
  await runMigrations(postgresServer.url);
  const seeded = await seedIfEmpty(postgresServer.url, defaultSizes, (url) => postgres(url, { max: 1, onnotice: () => {} }));
  if (seeded.length > 0) log(`Seeded demo data: ${seeded.join(', ')}`);

  const database = openDatabase(postgresServer.url, {
    max: config.databasePoolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    poolTimeoutMs: config.poolTimeoutMs,
  });
  const cursorSecret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  await warnWithoutAutovacuum(database.sql);
  const app = buildApp({ database, config, registry: demoRegistry(), cursorSecret, rateLimit: {} });

  const server = httpServer(app);
  const shutdown = gracefulShutdown(server, {
    timeoutMs: config.shutdownTimeoutMs,
    log,
    async release() {
      await database.close();
      await postgresServer.stop();
    },
    abandon: () => postgresServer.abandon(),
    exit: (code) => process.exit(code),
  });
  await listen(server, config.port);
  return shutdown;
}

const config = readConfig();
// Stop signals during start-up end the process at once; the embedded PostgreSQL, if one was started,
// is stopped by its exit hook. Once serving, they drain first. SIGHUP: the terminal went away.
let onStopSignal: (signal: NodeJS.Signals) => void = (signal) => {
  log(`${signal} during start-up: exiting`);
  process.exit(1);
};
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, (received) => onStopSignal(received));

onStopSignal = await start(config).catch((error: unknown) => {
  console.error(`Could not start: ${describeFailure(error, config.port)}`);
  return process.exit(1);
});
log(`Listening on http://localhost:${config.port}/v1`);
