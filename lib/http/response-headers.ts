// Headers every answer carries (request id, CORS, rate limit): gathered before the handler runs, written once.
import type { Context, MiddlewareHandler } from 'hono';

type HeaderRecord = Record<string, string>;

declare module 'hono' {
  interface ContextVariableMap {
    /**
     * Headers the answer is still to carry, gathered by middleware before the handler runs
     * (`addResponseHeaders`). A handler that makes its answer with them takes them (`takeResponseHeaders`);
     * any other answer gets them from `responseHeaders()` as it leaves.
     */
    responseHeaders: HeaderRecord | undefined;
  }
}

/**
 * Adds `headers` to those the answer is to carry; a later value of a name replaces an earlier one, but for
 * Vary, whose values are joined.
 */
export function addResponseHeaders(c: Context, headers: Readonly<HeaderRecord>): void {
  const pending = c.get('responseHeaders');
  if (pending === undefined) {
    c.set('responseHeaders', { ...headers });
    return;
  }
  const vary = pending.vary;
  Object.assign(pending, headers);
  if (vary !== undefined && headers.vary !== undefined) pending.vary = `${vary}, ${headers.vary}`;
}

/**
 * The headers the answer is to carry, for a handler that writes them into the plain header record it makes
 * its Response with: they then cost nothing more to send, where set afterwards on the finished Response they
 * would first turn its headers into a Headers object (which @hono/node-server then turns back).
 */
export function takeResponseHeaders(c: Context): Readonly<HeaderRecord> | undefined {
  const pending = c.get('responseHeaders');
  c.set('responseHeaders', undefined);
  return pending;
}

function write(c: Context): void {
  const pending = takeResponseHeaders(c);
  if (pending === undefined) return;
  try {
    const target = c.res.headers;
    // Vary lists what every layer says the answer depends on (CORS with a list of origins: Origin).
    for (const name in pending) name === 'vary' ? target.append(name, pending[name]!) : target.set(name, pending[name]!);
  } catch {
    for (const name in pending) c.header(name, pending[name]); // immutable headers
  }
}

/**
 * The middleware, first of all, that writes the gathered headers on every answer that was not made with
 * them: a handler's own, c.json, the error handler's problem. In place, on the answer as it leaves.
 */
export function responseHeaders(): MiddlewareHandler {
  return async function answerHeaders(c, next) {
    try {
      await next();
    } catch (error) {
      // Thrown past every handler: the error handler makes the answer after this, from the headers prepared here.
      const pending = takeResponseHeaders(c);
      if (pending !== undefined) for (const name in pending) c.header(name, pending[name]);
      throw error;
    }
    write(c);
  };
}
