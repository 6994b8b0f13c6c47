// Entry point on Deno (`deno run -A server.deno.ts`): the shared start-up, served by Deno.serve, with each
// request's peer address from Deno's connection info.
/// <reference types="deno" />
import { getConnInfo } from 'hono/deno';
import { createLogger } from './lib/http/logger.ts';
import { describeFailure, readConfig, startService, stopOnSignals } from './lib/http/startup.ts';

const config = readConfig(process.env);
const logger = createLogger({ level: config.logLevel, pretty: process.stdout.isTTY });
const log = (line: string) => logger.info(line);
const service = await startService(config, { logger, remoteAddress: (c) => getConnInfo(c).remote.address }).catch((error: unknown) => {
  console.error(`Could not start: ${describeFailure(error, config.port)}`);
  return process.exit(1);
});
const server = Deno.serve({ port: config.port, onListen: () => log(`Listening on http://localhost:${config.port}/v1`) }, (request, info) =>
  // hono/deno's getConnInfo reads the second argument as the context's env.
  service.app.fetch(request, info),
);
// Deno's shutdown() stops accepting and resolves once the requests in flight are answered.
stopOnSignals(service, {
  timeoutMs: config.shutdownTimeoutMs,
  log,
  stopServing: () => server.shutdown(),
  exit: (code) => process.exit(code),
});
