// Entry point on Deno (`deno run -A server.deno.ts`): the shared start-up, served by Deno.serve, with each
// request's peer address from Deno's connection info.
/// <reference types="deno" />
import { getConnInfo } from 'hono/deno';
import { demo } from './demo/index.ts';
import { checkedFetch } from './lib/http/target.ts';
import { startEntry, stopOnSignals } from './lib/service/startup.ts';

const { config, log, service } = await startEntry({ remoteAddress: (c) => getConnInfo(c).remote.address, demo });
// hono/deno's getConnInfo reads the second argument, the connection's info, as the context's env. A bad Host is
// answered before the app, as on Node (lib/http/target.ts).
const fetch = checkedFetch<Deno.ServeHandlerInfo>(service.app, service.app.refused);
const server = Deno.serve({ port: config.port, onListen: () => log(`Listening on http://localhost:${config.port}/v1`) }, fetch);
// Deno's shutdown() stops accepting and resolves once the requests in flight are answered.
stopOnSignals(service, {
  timeoutMs: config.shutdownTimeoutMs,
  log,
  stopServing: () => server.shutdown(),
  exit: (code) => process.exit(code),
});
