// The node:http server around the app: what reaches the app, and how what cannot reach it is answered.
import { createServer, type IncomingMessage, maxHeaderSize, type Server, type ServerResponse } from 'node:http';
import { getRequestListener, RequestError } from '@hono/node-server';
import type { Hono } from 'hono';
import { clientErrorHandler } from './client-error.ts';
import { ApiError, problemBody, problemResponse } from './errors.ts';
import type { Refused } from './refused.ts';
import { requestIdOf } from './request-id.ts';
import { HEALTH_CHECK_HOST, hostProblem, repeatedHostProblem, servedWithoutHost, targetProblem } from './target.ts';

/** What the server serves: the app's `fetch`, and where it records the requests answered before it (lib/service/app.ts). */
export type Served = Pick<Hono, 'fetch'> & { readonly refused?: Refused };

/** A node:http server that serves `app` (a Hono app, or anything with its `fetch`); not yet listening. */
export function httpServer(app: Served): Server {
  const refused: Refused = app.refused ?? (() => {});
  // A request the adapter still cannot turn into a Request, past the checks below, is still answered with
  // problem+json, not an empty 400.
  const serve = getRequestListener(app.fetch, {
    errorHandler: (error) => {
      if (!(error instanceof RequestError))
        return problemResponse(new ApiError('internal_error', 'Internal error'), requestIdOf(undefined));
      const problem = new ApiError('invalid_parameter', `Bad request: ${error.message}`, {
        invalidParams: [{ name: 'Host', reason: error.message }],
      });
      const id = requestIdOf(undefined);
      refused(problem, id);
      return problemResponse(problem, id);
    },
  });
  function listener(incoming: IncomingMessage, outgoing: ServerResponse): void {
    const target = incoming.url ?? '';
    if (incoming.headers.host === undefined && servedWithoutHost(target)) incoming.headers.host = HEALTH_CHECK_HOST;
    // The checks the Deno and Bun entries make too (lib/http/target.ts), so that all three answer alike.
    const problem = hostProblem(incoming.headers.host) ?? repeatedHostProblem(incoming.rawHeaders) ?? targetProblem(target);
    if (problem === undefined) {
      serve(incoming, outgoing);
      return;
    }
    const header = incoming.headers['x-request-id'];
    const id = requestIdOf(typeof header === 'string' ? header : undefined);
    refused(problem, id, incoming.method);
    const body = problemBody(problem, id);
    outgoing.writeHead(problem.status, {
      'content-type': 'application/problem+json',
      'x-request-id': id,
      'content-length': Buffer.byteLength(body),
    });
    outgoing.end(body);
  }
  // node:http would answer a missing Host itself, with an empty 400; the checks above answer it.
  const server = createServer({ requireHostHeader: false }, listener);
  // What the parser refuses before any handler runs (control bytes, bad Content-Length, 16 KiB of headers).
  server.on('clientError', clientErrorHandler({ maxHeaderSize, refused }));
  return server;
}
