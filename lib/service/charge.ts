// What a request under /v1 costs, for the rate limiter: a collection query is read once, here, before the
// limiter's decision, and priced by its collection's cost rule; its reading goes on to the handler.
import type { Context } from 'hono';
import type { Database } from '../../db/client.ts';
import { withTimeout } from '../http/deadline.ts';
import type { ApiError } from '../http/errors.ts';
import { apiTarget } from '../http/routes.ts';
import { estimateItems } from '../pagination/count.ts';
import { rawQueryOf } from '../pagination/params.ts';
import { countSettlement, needsEstimate, type Price, queryPrice, readCollectionQuery } from '../pagination/price.ts';
import type { Collection, Registry } from '../pagination/registry.ts';
import type { ReadQuery } from '../pagination/serve.ts';
import { type Charge, ONE_UNIT } from '../ratelimit/middleware.ts';

/** A collection query's charge: the price of its reading, settled at the rows its count read. */
class CollectionCharge implements Charge {
  readonly units: number;
  readonly sending: number;
  private readonly c: Context;
  private readonly price: Price;

  constructor(c: Context, price: Price) {
    this.c = c;
    this.price = price;
    this.units = price.units;
    this.sending = price.sending;
  }

  settle(): number {
    return countSettlement(this.price, this.c.get('counted'));
  }
}

/** Hands the reading (or its 400) on to the handler and prices it. */
function priced(c: Context, collection: Collection, read: ReadQuery | ApiError): Charge {
  c.set('collectionQuery', { collection, read });
  return new CollectionCharge(c, queryPrice(collection, read));
}

function withEstimate(c: Context, collection: Collection, read: ReadQuery, estimate: number): Charge {
  return priced(c, collection, { ...read, plan: { ...read.plan, estimate } });
}

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
    if (!needsEstimate(read)) return priced(c, collection, read);
    const planned = estimateItems(reads, collection, read.request.filters);
    if (typeof planned === 'number') return withEstimate(c, collection, read, planned); // kept from an earlier request
    // Bounded like the chunk's own queries: a connection that stopped answering is a 503, not a hang.
    return withTimeout(planned, reads.queryDeadlineMs).then((estimate) => withEstimate(c, collection, read, estimate));
  };
}

/** POST /v1/keys draws on the registration tier per address; everything else under /v1 on the client's. */
export function isRegistration(c: Context): boolean {
  return c.req.method === 'POST' && apiTarget(c.req.path).kind === 'keys';
}
