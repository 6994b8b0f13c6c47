// The node:http server around the app: what reaches the app, and how what cannot reach it is answered.
import { createServer, type IncomingMessage, maxHeaderSize, type Server, type ServerResponse } from 'node:http';
import { getRequestListener, RequestError } from '@hono/node-server';
import type { Hono } from 'hono';
import { clientErrorHandler } from './client-error.ts';
import { ApiError, problemResponse } from './errors.ts';
import { requestIdOf } from './request-id.ts';

/**
 * Paths whose answer does not depend on the Host: a load balancer's health check may leave Host out
 * (HAProxy's `option httpchk` sends HTTP/1.0 without one), and must not read a 400 as an instance down.
 */
const HOSTLESS_PATHS = new Set(['/healthz', '/readyz']);

/** The Host a health check without one is served as; it appears in no answer. */
const HEALTH_CHECK_HOST = 'localhost';

/** A node:http server that serves `app` (a Hono app, or anything with its `fetch`); not yet listening. */
export function httpServer(app: Pick<Hono, 'fetch'>): Server {
  // A request the adapter cannot turn into a Request (bad or missing Host header, HTTP/1.0 without one)
  // is still answered with problem+json, not an empty 400.
  const serve = getRequestListener(app.fetch, {
    errorHandler: (error) =>
      problemResponse(
        error instanceof RequestError
          ? new ApiError('invalid_parameter', `Bad request: ${error.message}`, { invalidParams: [{ name: 'Host', reason: error.message }] })
          : new ApiError('internal_error', 'Internal error'),
        requestIdOf(undefined),
      ),
  });
  function listener(incoming: IncomingMessage, outgoing: ServerResponse): void {
    if (incoming.headers.host === undefined && HOSTLESS_PATHS.has(incoming.url ?? '')) incoming.headers.host = HEALTH_CHECK_HOST;
    serve(incoming, outgoing);
  }
  // node:http would answer a missing Host itself, with an empty 400; the adapter's check above answers it.
  const server = createServer({ requireHostHeader: false }, listener);
  // What the parser refuses before any handler runs (control bytes, bad Content-Length, 16 KiB of headers).
  server.on('clientError', clientErrorHandler({ maxHeaderSize }));
  return server;
}
