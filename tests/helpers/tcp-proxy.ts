// A TCP proxy in the test process between the service and PostgreSQL that can freeze, reset or refuse.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './processes.ts';

/** What happens to a connection accepted from now on. */
type NewConnections =
  /** Passed through to PostgreSQL. */
  | 'pass'
  /** Reset at once (a database that refuses connections). */
  | 'refuse'
  /** Accepted, and every byte dropped: a connection attempt that is never answered. */
  | 'blackhole'
  /** Accepted and held unanswered, then passed through (bytes sent meanwhile included) once `accept('pass')`. */
  | 'hold';

export interface TcpProxy {
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's. */
  urlOf(url: string): string;
  /**
   * Existing connections stop passing anything, both ways, with their sockets left open: what a moved
   * virtual IP or a failover does. Connections accepted later are not affected.
   */
  freeze(): void;
  /** Resets (RST) both sides of every existing connection. */
  reset(): void;
  /** Sets what happens to connections accepted from now on. */
  accept(mode: NewConnections): void;
  /** Connections open now (frozen ones included). */
  connections(): number;
  /** The local ports of the proxy's connections to PostgreSQL: `client_port` in pg_stat_activity. */
  upstreamPorts(): number[];
  close(): Promise<void>;
}

interface Link {
  readonly client: Socket;
  server: Socket | undefined;
  frozen: boolean;
  /** Bytes from the client of a held connection, passed on once it is let through. */
  held: Buffer[] | undefined;
}

/**
 * Resets a socket (RST), or closes it when a reset cannot be had. Node 20's resetAndDestroy() fails with
 * EINVAL while the socket's own shutdown is under way (its write side ended, after the peer's FIN when
 * half-open sockets are not allowed, and not yet finished): the error is emitted, the socket taken for
 * destroyed, and its handle left open for good, so that the process, once done, spins at exit waiting for
 * that handle to close (gdb: node::Environment::CleanupHandles) until it is killed. Its write side is
 * closing anyway, so a plain destroy() is what the peer would see next.
 */
export function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.writableEnded && !socket.writableFinished) socket.destroy();
  else socket.resetAndDestroy();
}

/** Starts a proxy on a free port of the tests' range to `target` (a postgres:// URL). */
export async function startProxy(t: { teardown(fn: () => unknown): void }, target: string): Promise<TcpProxy> {
  const upstream = new URL(target);
  const links = new Set<Link>();
  let mode: NewConnections = 'pass';

  function drop(link: Link): void {
    links.delete(link);
    link.client.destroy();
    link.server?.destroy();
  }

  /** Connects `link` to PostgreSQL, passing on what the client sent meanwhile. */
  function through(link: Link): void {
    const server = connect(Number(upstream.port || 5432), upstream.hostname);
    link.server = server;
    server.on('error', () => {});
    for (const chunk of link.held ?? []) server.write(chunk);
    link.held = undefined;
    // A frozen link passes nothing, not even a close: the other side learns of it only from a reset.
    server.on('data', (chunk) => link.frozen || link.client.write(chunk));
    server.on('close', () => link.frozen || drop(link));
  }

  const server: Server = createServer((client) => {
    client.on('error', () => {});
    if (mode === 'refuse') {
      resetSocket(client);
      return;
    }
    const link: Link = { client, server: undefined, frozen: mode === 'blackhole', held: mode === 'hold' ? [] : undefined };
    links.add(link);
    client.on('data', (chunk) => link.frozen || (link.held ? link.held.push(chunk) : link.server?.write(chunk)));
    client.on('close', () => link.frozen || drop(link));
    if (mode === 'pass') through(link);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));

  function reset(): void {
    for (const link of links) {
      links.delete(link);
      resetSocket(link.client);
      if (link.server) resetSocket(link.server);
    }
  }

  const proxy: TcpProxy = {
    port,
    urlOf(url) {
      const through = new URL(url);
      through.hostname = '127.0.0.1';
      through.port = String(port);
      return through.toString();
    },
    freeze() {
      for (const link of links) link.frozen = true;
    },
    reset,
    accept(next) {
      mode = next;
      if (next !== 'pass') return;
      for (const link of links) if (link.held) through(link);
    },
    connections: () => links.size,
    upstreamPorts: () => [...links].flatMap((link) => (link.server?.localPort === undefined ? [] : [link.server.localPort])),
    async close() {
      reset();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  t.teardown(() => proxy.close());
  return proxy;
}
