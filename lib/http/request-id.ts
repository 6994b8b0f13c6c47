// X-Request-Id on every answer (docs/api.md, "Request ids"): the client's own when it is sane, else a fresh one.
import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { addResponseHeaders } from './response-headers.ts';

/**
 * A request id a client may choose: 1 to 128 characters of letters, digits and `_ - . : = + /` (UUIDs,
 * ULIDs, base64 and the `Root=1-…` of AWS's trace ids fit). Anything else is replaced, never echoed: the id
 * goes into headers, bodies and logs.
 */
const SANE_ID = /^[\w.:=+/-]{1,128}$/;

/** The client's X-Request-Id when it is sane, otherwise a new random UUID. */
export function requestIdOf(header: string | undefined): string {
  return header !== undefined && SANE_ID.test(header) ? header : randomUUID();
}

declare module 'hono' {
  /** `requestId`: this request's id, as its X-Request-Id answer header and problem bodies carry it. */
  interface ContextVariableMap {
    requestId: string;
  }
}

/**
 * The request id middleware, before every other but `responseHeaders()`. Hono's own (`hono/request-id`) sets
 * its header before the handler runs, where an answer the handler makes itself (every chunk) does not see
 * it; this one adds it to the headers every answer carries (lib/http/response-headers.ts). Problem bodies
 * take it from the context (lib/http/errors.ts).
 */
export function requestIds(): MiddlewareHandler {
  // Not async: with nothing to do after the layers inside, it hands their promise on rather than awaiting it.
  return function requestId(c, next) {
    const id = requestIdOf(c.req.header('x-request-id'));
    c.set('requestId', id);
    addResponseHeaders(c, { 'x-request-id': id });
    return next();
  };
}
