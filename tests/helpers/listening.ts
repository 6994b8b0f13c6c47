// A test app served over a real socket in-process, with the service's own listener (lib/http/listener.ts).
import { once } from 'node:events';
import type { Hono } from 'hono';
import { httpServer } from '../../lib/http/listener.ts';
import { freePort } from './processes.ts';

/** Serves `app` (or anything with its `fetch`) on 127.0.0.1 and a free port until the test ends; resolves to its origin, `http://127.0.0.1:<port>`. */
export async function listening(t: { teardown(fn: () => unknown): void }, app: Pick<Hono, 'fetch'>): Promise<string> {
  const port = await freePort();
  const server = httpServer(app);
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });
  return `http://127.0.0.1:${port}`;
}
