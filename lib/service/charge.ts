// What a request under /v1 costs, for the rate limiter: a collection query is read once, here, before the
// limiter's decision, and priced by its collection's cost rule; its reading goes on to the handler.
import type { Context } from 'hono';
import type { Database } from '../../db/client.ts';
import { withTimeout } from '../http/deadline.ts';
import { apiTarget } from '../http/routes.ts';
import { estimateItems } from '../pagination/count.ts';
import { rawQueryOf } from '../pagination/params.ts';
import { countSettlement, needsEstimate, queryPrice, readCollectionQuery } from '../pagination/price.ts';
import type { Registry } from '../pagination/registry.ts';
import { type Charge, ONE_UNIT } from '../ratelimit/middleware.ts';

/**
 * The limiter's `charge`: a collection query's reading (or the 400 it answers) is set as the context
 * variable `collectionQuery` for the handler, so that the query string is parsed once. A count is priced
 * by the rows it will read: the planner's estimate, asked for before the decision and handed on with the
 * reading, then settled at the rows the count read (docs/rate-limit.md, "Counts").
 */
export function collectionCharge(registry: Registry, reads: Database, cursorSecret: string) {
  // Synchronous unless a count needs the planner: a request waits for no more turns of the event loop than
  // its own statements take.
  return function charge(c: Context): Charge | Promise<Charge> {
    // Anything that is not a GET or HEAD of a collection (the index, a 404, a 405, POST /v1/keys): 1 unit.
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') return ONE_UNIT;
    const target = apiTarget(c.req.path);
    const collection = target.kind === 'named' ? registry.get(target.name) : undefined;
    if (collection === undefined) return ONE_UNIT;
    const read = readCollectionQuery(collection, rawQueryOf(c.req.url), cursorSecret);
    const priced = (query: typeof read): Charge => {
      c.set('collectionQuery', { collection, read: query });
      const price = queryPrice(collection, query);
      return { units: price.units, sending: price.sending, settle: () => countSettlement(price, c.get('counted')) };
    };
    if (!needsEstimate(read)) return priced(read);
    const planned = estimateItems(reads, collection, read.request.filters);
    const withEstimate = (estimate: number) => priced({ ...read, plan: { ...read.plan, estimate } });
    if (typeof planned === 'number') return withEstimate(planned); // kept from an earlier request
    // Bounded like the chunk's own queries: a connection that stopped answering is a 503, not a hang.
    return withTimeout(planned, reads.queryDeadlineMs).then(withEstimate);
  };
}

/** POST /v1/keys draws on the registration tier per address; everything else under /v1 on the client's. */
export function isRegistration(c: Context): boolean {
  return c.req.method === 'POST' && apiTarget(c.req.path).kind === 'keys';
}
