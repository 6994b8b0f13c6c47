// A TCP proxy in the test process between the service and PostgreSQL that can freeze, reset or refuse.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './servers.ts';

/** What happens to a connection accepted from now on. */
export type NewConnections =
  /** Passed through to PostgreSQL. */
  | 'pass'
  /** Reset at once (a database that refuses connections). */
  | 'refuse'
  /** Accepted, and every byte dropped: a connection attempt that is never answered. */
  | 'blackhole';

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
  readonly server: Socket | undefined;
  frozen: boolean;
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

  const server: Server = createServer((client) => {
    client.on('error', () => {});
    if (mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const link: Link =
      mode === 'blackhole'
        ? { client, server: undefined, frozen: true }
        : { client, server: connect(Number(upstream.port || 5432), upstream.hostname), frozen: false };
    links.add(link);
    link.server?.on('error', () => {});
    // A frozen link passes nothing, not even a close: the other side learns of it only from a reset.
    client.on('data', (chunk) => link.frozen || link.server?.write(chunk));
    link.server?.on('data', (chunk) => link.frozen || client.write(chunk));
    client.on('close', () => link.frozen || drop(link));
    link.server?.on('close', () => link.frozen || drop(link));
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));

  function reset(): void {
    for (const link of links) {
      links.delete(link);
      if (!link.client.destroyed) link.client.resetAndDestroy();
      if (link.server && !link.server.destroyed) link.server.resetAndDestroy();
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
