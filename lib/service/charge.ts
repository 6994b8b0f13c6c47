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

/**
 * A collection query's charge: the price of its reading, the count's units left out where they need the
 * planner's estimate (complete() adds them once the request is admitted), the count settled at its rows.
 */
class CollectionCharge implements Charge {
  readonly units: number;
  readonly sending: number;
  readonly complete: (() => number | Promise<number>) | undefined;
  private readonly c: Context;
  /** The price charged at the decision: with the count's units left out when they await the estimate. */
  private readonly price: Price;

  constructor(c: Context, price: Price, complete?: () => number | Promise<number>) {
    this.c = c;
    this.price = price;
    this.units = price.units;
    this.sending = price.sending;
    this.complete = complete;
  }

  settle(): number {
    return countSettlement(this.price, this.c.get('counted'));
  }
}

/** Hands the reading (or its 400) on to the handler and prices it. */
function priced(c: Context, collection: Collection, read: ReadQuery | ApiError): Price {
  c.set('collectionQuery', { collection, read });
  return queryPrice(collection, read);
}

/** The count's units, once the estimate is known: the reading handed on with it (`c`'s collectionQuery). */
function withEstimate(c: Context, collection: Collection, read: ReadQuery, estimate: number): number {
  return priced(c, collection, { ...read, plan: { ...read.plan, estimate } }).counting;
}

/**
 * The limiter's `charge`: a collection query's reading (or the 400 it answers) is set as the context
 * variable `collectionQuery` for the handler, so that the query string is parsed once. A count is priced
 * by the rows it will read: the planner's estimate, asked for once the request is admitted (a declined one
 * costs no planner work) and handed on with the reading, then settled at the rows the count read
 * (docs/rate-limit.md, "Counts").
 */
export function collectionCharge(registry: Registry, reads: Database, cursorSecret: string) {
  return function charge(c: Context): Charge {
    // Anything that is not a GET or HEAD of a collection (the index, a 404, a 405, POST /v1/keys): 1 unit.
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') return ONE_UNIT;
    const target = apiTarget(c.req.path);
    const collection = target.kind === 'named' ? registry.get(target.name) : undefined;
    if (collection === undefined) return ONE_UNIT;
    const read = readCollectionQuery(collection, rawQueryOf(c.req.url), cursorSecret);
    const base = priced(c, collection, read);
    if (!needsEstimate(read)) return new CollectionCharge(c, base);
    // Synchronous when the estimate is kept: a request waits for no more turns of the event loop than its
    // own statements take.
    return new CollectionCharge(c, base, () => {
      const planned = estimateItems(reads, collection, read.request.filters);
      if (typeof planned === 'number') return withEstimate(c, collection, read, planned); // kept from an earlier request
      // Bounded like the chunk's own queries: a connection that stopped answering is a 503, not a hang.
      return withTimeout(planned, reads.queryDeadlineMs).then((estimate) => withEstimate(c, collection, read, estimate));
    });
  };
}

/** POST /v1/keys draws on the registration tier per address; everything else under /v1 on the client's. */
export function isRegistration(c: Context): boolean {
  return c.req.method === 'POST' && apiTarget(c.req.path).kind === 'keys';
}
