// Serves a test app over a real socket on a free port (for clients that need a URL: a browser, the recipes).
import { serve } from '@hono/node-server';
import { freePort } from './processes.ts';

/** Listens on 127.0.0.1 and a free port; closed at teardown. Resolves to the base URL, without a trailing slash. */
export async function listenApp(
  t: { teardown(fn: () => unknown): void },
  app: { fetch: (request: Request) => Response | Promise<Response> },
): Promise<string> {
  const port = await freePort();
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const started = serve({ fetch: (request) => app.fetch(request), port, hostname: '127.0.0.1' }, () => resolve(started));
  });
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  );
  return `http://127.0.0.1:${port}`;
}
