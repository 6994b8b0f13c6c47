// Graceful shutdown with a deadline: fail readiness for a drain period, stop accepting, let keep-alive clients
// move on, finish in-flight requests.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export interface ShutdownOptions {
  /**
   * How long the server goes on serving after the signal, with /readyz failing (`onSignal`), before it stops
   * accepting: the time a load balancer's health check takes to mark the instance down. 0: stop at once.
   */
  drainMs: number;
  /** Called at the first signal, before the drain period: the app fails /readyz from then on. */
  onSignal: () => void /** Past this, connections are cut and the process exits 1 whatever is still running. */;
  timeoutMs: number;
  log: (line: string) => void;
  /** Closes what the server used (pool, embedded PostgreSQL) once no request is left. */
  release: () => Promise<void>;
  /** Last words when the deadline passes or a second signal comes: synchronous, the process exits next. */
  abandon: () => void;
  exit: (code: number) => void;
}

/**
 * A signal repeated within this time is the same request to stop, not a second one: on Ctrl-C the
 * terminal signals npm and the server, and npm forwards its copy to the server too.
 */
const REPEAT_MS = 500;

/**
 * Tracks the server's responses and returns the function to call on SIGTERM/SIGINT. Once it is called,
 * every response not yet begun carries `Connection: close`, so a client reusing a connection gets its
 * current answer and then reconnects elsewhere; idle connections are closed at once and each one that
 * goes idle after its last response is closed then.
 */
export function gracefulShutdown(server: Server, options: ShutdownOptions) {
  const pending = new Set<ServerResponse>();
  let stoppingSince: number | undefined;
  /** Past the drain period: responses tell keep-alive clients to go. While draining they are served as before. */
  let closing = false;

  // Before the app's own listener, which may write its response synchronously.
  server.prependListener('request', (_request: IncomingMessage, response: ServerResponse) => {
    pending.add(response);
    if (closing) response.setHeader('connection', 'close');
    // One listener, not `once` (a response closes once): a response ends with 'close', after 'finish' when it
    // was sent whole.
    response.on('close', () => {
      pending.delete(response);
      // A response whose headers went out before the signal leaves its connection open, and now idle.
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
  });

  function force(reason: string): void {
    options.log(`${reason}: closing ${pending.size} connection(s) with requests in flight and exiting`);
    server.closeAllConnections();
    options.abandon();
    options.exit(1);
  }

  /** Stops accepting, closes idle connections, and exits once the requests in flight are done or by the deadline. */
  function stop(signal: NodeJS.Signals): void {
    closing = true;
    options.log(`${signal}: finishing ${pending.size} request(s) in flight, for at most ${options.timeoutMs} ms`);
    for (const response of pending) {
      if (!response.headersSent) response.setHeader('connection', 'close');
    }
    const deadline = setTimeout(() => force(`Shutdown deadline of ${options.timeoutMs} ms passed`), options.timeoutMs);
    // Stops accepting and closes the idle keep-alive connections; calls back once the last one is closed.
    server.close(() => {
      options.release().then(
        () => {
          clearTimeout(deadline);
          options.exit(0);
        },
        (error: unknown) => force(`Closing the database failed (${(error as Error).message})`),
      );
    });
  }

  return function shutdown(signal: NodeJS.Signals): void {
    if (stoppingSince !== undefined) {
      if (performance.now() - stoppingSince >= REPEAT_MS) force(`${signal} again`);
      return;
    }
    stoppingSince = performance.now();
    options.onSignal();
    if (options.drainMs === 0) {
      stop(signal);
      return;
    }
    options.log(`${signal}: /readyz fails from now; serving for ${options.drainMs} ms more so that balancers stop sending`);
    setTimeout(() => stop(signal), options.drainMs);
  };
}
