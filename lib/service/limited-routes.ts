// The rate limit of every path under /v1 that is not a collection request (the index, POST /v1/keys, a 404 or a
// 405): 1 unit each, admitted before the route and settled once it answered (docs/reference/limits.md, "What is limited").
import type { Context, MiddlewareHandler } from 'hono';
import { writeHeaders } from '../http/exchange.ts';
import { apiTarget } from '../http/routes.ts';
import { type Client, type Gate, ONE_UNIT } from '../ratelimit/gate.ts';

/** The client a request names: its socket's peer, its X-Forwarded-For and its Authorization. */
export function clientOf(c: Context, registration: boolean): Client {
  return {
    peer: c.get('exchange').peer,
    forwardedFor: c.req.header('x-forwarded-for'),
    authorization: c.req.header('authorization'),
    registration,
  };
}

/**
 * The middleware in front of /v1, but behind the collections' route: a GET or HEAD of `/v1/{name}` is a
 * collection request, admitted by its own stages (lib/service/collection-request.ts), which answer a name that
 * is no collection (the keys' among them) and never reach this (lib/service/app.ts adds the route first).
 */
export function limitedRoutes(gate: Gate): MiddlewareHandler {
  return async function limitedRoute(c, next) {
    const method = c.req.method;
    const target = apiTarget(c.req.path);
    // POST /v1/keys draws on the registration tier per address; everything else on the client's.
    const admission = await gate.admit(clientOf(c, method === 'POST' && target.kind === 'keys'), ONE_UNIT, c.get('exchange'));
    // An error of the route is answered by the one error handler before this goes on: c.res is its problem.
    // Anything thrown past it still settles the request, its lease released, before the error goes on.
    try {
      await next();
    } catch (error) {
      await gate.settle(admission, { status: 500, notModified: false, counted: undefined, error });
      throw error;
    }
    writeHeaders(c, await gate.settle(admission, { status: c.res.status, notModified: false, counted: undefined, error: c.error }));
  };
}
