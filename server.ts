// Entry point: read the config, open the database, build the app, serve, shut down cleanly.
import { createServer } from 'node:http';
import { getRequestListener, RequestError } from '@hono/node-server';
import postgres from 'postgres';
import { openDatabase } from './db/client.ts';
import { resolveDatabaseUrl } from './db/embedded.ts';
import { runMigrations } from './db/migrate.ts';
import { defaultSizes, seedIfEmpty } from './db/seed.ts';
import { buildApp } from './lib/app.ts';
import { ConfigError, parseConfig, type Config } from './lib/config.ts';
import { ApiError, problemResponse } from './lib/errors.ts';
import { demoRegistry } from './lib/registry.ts';
import { loadCursorSecret } from './lib/secret.ts';

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

const config = readConfig();
const postgresServer = await resolveDatabaseUrl(config.databaseUrl, log);
await runMigrations(postgresServer.url);
const seeded = await seedIfEmpty(postgresServer.url, defaultSizes, (url) => postgres(url, { max: 1, onnotice: () => {} }));
if (seeded.length > 0) log(`Seeded demo data: ${seeded.join(', ')}`);

const database = openDatabase(postgresServer.url, { statementTimeoutMs: config.statementTimeoutMs, poolTimeoutMs: config.poolTimeoutMs });
const cursorSecret = await loadCursorSecret(database.db, config.cursorSecret);
const app = buildApp({ database, config, registry: demoRegistry(), cursorSecret, rateLimit: {} });

// A request the adapter cannot turn into a Request (bad Host header, HTTP/1.0 without one) is still
// answered with problem+json, not an empty 400.
const listener = getRequestListener(app.fetch, {
  errorHandler: (error) =>
    problemResponse(
      error instanceof RequestError
        ? new ApiError('invalid_parameter', `Bad request: ${error.message}`, { invalidParams: [{ name: 'Host', reason: error.message }] })
        : new ApiError('internal_error', 'Internal error'),
    ),
});
const server = createServer(listener).listen(config.port, () => {
  log(`Listening on http://localhost:${config.port}/v1`);
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  log(`${signal}: finishing in-flight requests`);
  // Stop accepting; let in-flight requests finish; idle keep-alive sockets are closed now.
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    if ('closeIdleConnections' in server) server.closeIdleConnections();
  });
  await database.close();
  await postgresServer.stop();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
