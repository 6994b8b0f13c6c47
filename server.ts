// Entry point on Node: the shared start-up (lib/service/startup.ts), served by node:http, shut down cleanly.
import type { Server } from 'node:http';
import { demo } from './demo/index.ts';
import { httpServer } from './lib/http/listener.ts';
import { gracefulShutdown } from './lib/http/shutdown.ts';
import { describeFailure, startEntry } from './lib/service/startup.ts';

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

// Stop signals during start-up end the process at once; the embedded PostgreSQL, if one was started,
// is stopped by its exit hook. Once serving, they drain first.
let onStopSignal: (signal: NodeJS.Signals) => void = (signal) => {
  console.log(`${signal} during start-up: exiting`);
  process.exit(1);
};
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, (received) => onStopSignal(received));
// SIGHUP reads the collections file and the catalog again (docs/how-to/schema-changes.md); one during start-up, once
// it has read them, is not lost.
let onHangup = () => {
  hungUp = true;
};
let hungUp = false;
process.on('SIGHUP', () => onHangup());

let draining = false;
const { config, log, service } = await startEntry({ draining: () => draining, demo });
const server = httpServer(service.app);
const shutdown = gracefulShutdown(server, {
  drainMs: config.shutdownDrainMs,
  onSignal: () => {
    draining = true;
  },
  timeoutMs: config.shutdownTimeoutMs,
  log,
  release: () => service.release(),
  abandon: () => service.abandon(),
  exit: (code) => process.exit(code),
});
await listen(server, config.port).catch((error: unknown) => {
  console.error(`Could not start: ${describeFailure(error, config.port)}`);
  service.abandon();
  return process.exit(1);
});
onStopSignal = shutdown;
onHangup = () => service.reload('SIGHUP');
if (hungUp) onHangup();
log(`Listening on http://localhost:${config.port}/v1`);
