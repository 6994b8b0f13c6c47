// Entry point on Bun (`bun server.bun.ts`): the shared start-up, served by Bun.serve, with each request's
// peer address from Bun's connection info.
/// <reference types="bun" />
import { getConnInfo } from 'hono/bun';
import { createLogger } from './lib/http/logger.ts';
import { describeFailure, readConfig, startService, stopOnSignals } from './lib/http/startup.ts';

const config = readConfig(process.env);
const logger = createLogger({ level: config.logLevel, pretty: process.stdout.isTTY });
const log = (line: string) => logger.info(line);
const service = await startService(config, { logger, remoteAddress: (c) => getConnInfo(c).remote.address }).catch((error: unknown) => {
  console.error(`Could not start: ${describeFailure(error, config.port)}`);
  return process.exit(1);
});
// hono/bun's getConnInfo asks the server (the context's env) for the request's address.
const server = Bun.serve({ port: config.port, fetch: (request, bunServer) => service.app.fetch(request, bunServer) });
log(`Listening on http://localhost:${config.port}/v1`);
// Bun's stop() stops accepting and resolves once the requests in flight are answered.
stopOnSignals(service, { timeoutMs: config.shutdownTimeoutMs, log, stopServing: () => server.stop(), exit: (code) => process.exit(code) });
