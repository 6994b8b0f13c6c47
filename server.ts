// Entry point: read the config, open the database, build the app, serve, shut down cleanly.
import { serve } from '@hono/node-server';
import postgres from 'postgres';
import { openDatabase } from './db/client.ts';
import { resolveDatabaseUrl } from './db/embedded.ts';
import { runMigrations } from './db/migrate.ts';
import { defaultSizes, seedIfEmpty } from './db/seed.ts';
import { buildApp } from './lib/app.ts';
import { ConfigError, parseConfig, type Config } from './lib/config.ts';
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

const database = openDatabase(postgresServer.url);
const cursorSecret = await loadCursorSecret(database.db, config.cursorSecret);
const app = buildApp({ database, config, registry: demoRegistry(), cursorSecret, rateLimit: {} });

const server = serve({ fetch: app.fetch, port: config.port }, (info) => {
  log(`Listening on http://localhost:${info.port}/v1`);
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
  await database.sql.end({ timeout: 5 });
  await postgresServer.stop();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
