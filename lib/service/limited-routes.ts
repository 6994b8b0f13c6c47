// The rate limit of every path under /v1 that is not a collection request (the index, POST /v1/keys, a 404 or a
// 405): 1 unit each, admitted before the route and settled once it answered (docs/reference/limits.md, "What is limited").
import type { MiddlewareHandler } from 'hono';
import { writeHeaders } from '../http/exchange.ts';
import { apiTarget } from '../http/routes.ts';
import { type Gate, ONE_UNIT } from '../ratelimit/gate.ts';

/**
 * The middleware in front of /v1. A GET or HEAD of `/v1/{name}` is a collection request, admitted by its own
 * stages (lib/service/collection-request.ts), which answer a name that is no collection (the keys' among them).
 */
export function limitedRoutes(gate: Gate): MiddlewareHandler {
  return async function limitedRoute(c, next) {
    const method = c.req.method;
    const target = apiTarget(c.req.path);
    if ((method === 'GET' || method === 'HEAD') && (target.kind === 'named' || target.kind === 'keys')) return next();
    const exchange = c.get('exchange');
    const client = {
      peer: exchange.peer,
      forwardedFor: c.req.header('x-forwarded-for'),
      authorization: c.req.header('authorization'),
      // POST /v1/keys draws on the registration tier per address; everything else on the client's.
      registration: method === 'POST' && target.kind === 'keys',
    };
    const admission = await gate.admit(client, ONE_UNIT, exchange);
    // An error of the route is answered by the one error handler before this goes on: c.res is its problem.
    // Anything thrown past it still settles the request, its lease released, before the error goes on.
    let settled = false;
    try {
      await next();
      settled = true;
      const status = c.res.status;
      writeHeaders(c, await gate.settle(admission, { status, notModified: false, counted: undefined, error: c.error }));
    } finally {
      if (!settled) await gate.settle(admission, { status: 500, notModified: false, counted: undefined, error: undefined });
    }
  };
}
