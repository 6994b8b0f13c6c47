// Entry point: read the config, open the database, build the app, serve, shut down cleanly.
import type { Server } from 'node:http';
import type { Config } from './lib/http/config.ts';
import { httpServer } from './lib/http/listener.ts';
import { createLogger } from './lib/http/logger.ts';
import { gracefulShutdown } from './lib/http/shutdown.ts';
import { describeFailure, readConfig, startService } from './lib/http/startup.ts';

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Everything up to listening; resolves to what a stop signal should run. */
async function start(config: Config) {
  let draining = false;
  const { app, release, abandon } = await startService(config, { logger, draining: () => draining });

  const server = httpServer(app);
  const shutdown = gracefulShutdown(server, {
    drainMs: config.shutdownDrainMs,
    onSignal: () => {
      draining = true;
    },
    timeoutMs: config.shutdownTimeoutMs,
    log,
    release,
    abandon,
    exit: (code) => process.exit(code),
  });
  await listen(server, config.port);
  return shutdown;
}

const config = readConfig(process.env);
// JSON lines for whatever collects them; readable ones when a person watches the terminal.
const logger = createLogger({ level: config.logLevel, pretty: process.stdout.isTTY });
const log = (line: string) => logger.info(line);
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
