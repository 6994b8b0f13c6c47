// Headers every answer carries (request id, CORS, rate limit): gathered before the handler runs, written once.
import type { Context, MiddlewareHandler } from 'hono';

type HeaderRecord = Readonly<Record<string, string>>;

/**
 * The header records an answer is still to carry, in the order they were added. Kept as the records
 * themselves, not merged: a middleware's record is often made once for every request (CORS), and merging
 * them per request would copy every header for nothing.
 */
export type PendingHeaders = HeaderRecord[];

declare module 'hono' {
  interface ContextVariableMap {
    /**
     * Headers the answer is still to carry, gathered by middleware before the handler runs
     * (`addResponseHeaders`). A handler that makes its answer with them takes them (`takeResponseHeaders`);
     * any other answer gets them from `responseHeaders()` as it leaves.
     */
    responseHeaders: PendingHeaders | undefined;
  }
}

/** Adds `headers` (kept as it is: never change it afterwards) to those the answer is to carry. */
export function addResponseHeaders(c: Context, headers: HeaderRecord): void {
  const pending = c.get('responseHeaders');
  if (pending === undefined) c.set('responseHeaders', [headers]);
  else pending.push(headers);
}

/**
 * The headers the answer is to carry, for a handler that writes them into the plain header record it makes
 * its Response with (`mergeHeaders`): they then cost nothing more to send, where set afterwards on the
 * finished Response they would first turn its headers into a Headers object (which @hono/node-server then
 * turns back).
 */
export function takeResponseHeaders(c: Context): PendingHeaders | undefined {
  const pending = c.get('responseHeaders');
  c.set('responseHeaders', undefined);
  return pending;
}

/**
 * Writes `pending` into the plain header record `target`: a later value of a name replaces an earlier one,
 * but for Vary, whose values are joined (what every layer says the answer depends on: Accept-Encoding, Origin).
 */
export function mergeHeaders(target: Record<string, string>, pending: PendingHeaders | undefined): void {
  if (pending === undefined) return;
  for (const record of pending) {
    for (const name in record) {
      const value = record[name]!;
      const before = name === 'vary' ? target.vary : undefined;
      target[name] = before === undefined ? value : `${before}, ${value}`;
    }
  }
}

function write(c: Context): void {
  const pending = takeResponseHeaders(c);
  if (pending === undefined) return;
  try {
    const target = c.res.headers;
    for (const record of pending) {
      for (const name in record) name === 'vary' ? target.append(name, record[name]!) : target.set(name, record[name]!);
    }
  } catch {
    for (const record of pending) for (const name in record) c.header(name, record[name], { append: name === 'vary' }); // immutable headers
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
      if (pending !== undefined)
        for (const record of pending) for (const name in record) c.header(name, record[name], { append: name === 'vary' });
      throw error;
    }
    write(c);
  };
}
