// Entry point on Deno (`deno run -A server.deno.ts`): the shared start-up, served by Deno.serve, with each
// request's peer address from Deno's connection info.
/// <reference types="deno" />
import { getConnInfo } from 'hono/deno';
import { describeFailure, readConfig, startService, stopOnSignals } from './lib/http/startup.ts';

const log = (line: string) => console.log(line);
const config = readConfig(process.env);
const service = await startService(config, { log, remoteAddress: (c) => getConnInfo(c).remote.address }).catch((error: unknown) => {
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
