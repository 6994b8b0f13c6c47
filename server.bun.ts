// Entry point on Bun (`bun server.bun.ts`): the shared start-up, served by Bun.serve, with each request's
// peer address from Bun's connection info.
/// <reference types="bun" />
import { getConnInfo } from 'hono/bun';
import { demo } from './demo/index.ts';
import { checkedFetch } from './lib/http/target.ts';
import { startEntry, stopOnSignals } from './lib/service/startup.ts';

const { config, log, service } = await startEntry({ remoteAddress: (c) => getConnInfo(c).remote.address, demo });
// hono/bun's getConnInfo asks the server (the context's env) for the request's address. A bad Host is answered
// before the app, as on Node (lib/http/target.ts).
const fetch = checkedFetch<Bun.Server<undefined>>(service.app, service.app.refused);
const server = Bun.serve({ port: config.port, fetch });
log(`Listening on http://localhost:${config.port}/v1`);
// Bun's stop() stops accepting and resolves once the requests in flight are answered.
stopOnSignals(service, { timeoutMs: config.shutdownTimeoutMs, log, stopServing: () => server.stop(), exit: (code) => process.exit(code) });
