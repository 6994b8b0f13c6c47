// GET /v1/{collection}, in five stages over values: prepare → admit → execute → settle → respond
// (docs/reference/api.md; docs/reference/costs.md, "The rule"). The route handler is this function; nothing travels beside it,
// and it answers its own errors, refusals included.
import type { Context } from 'hono';
import type { Database } from '../../db/client.ts';
import type { Compressor } from '../http/compression.ts';
import { matchesAny, notModified } from '../http/conditional.ts';
import { withTimeout } from '../http/deadline.ts';
import { ApiError, collectionUnavailable, notAllowed, problemOf } from '../http/errors.ts';
import type { Exchange } from '../http/exchange.ts';
import { baseUrl, type LinkOrigin } from '../http/forwarding.ts';
import { ANONYMOUS, type Principal } from '../http/principal.ts';
import { collectionPath, KEYS } from '../http/routes.ts';
import { credentialsNeeded, needsCredentials } from '../pagination/access.ts';
import { type RenderedChunk, renderChunk } from '../pagination/chunk.ts';
import { estimateItems } from '../pagination/count.ts';
import { execute } from '../pagination/execute.ts';
import { rawQueryOf } from '../pagination/params.ts';
import { needsEstimate, type Prepared, Preparer, refusedWith, withEstimate } from '../pagination/prepare.ts';
import { countSettlement } from '../pagination/price.ts';
import { respond } from '../pagination/respond.ts';
import type { Admission, Charge, Gate } from '../ratelimit/gate.ts';
import { clientOf } from './limited-routes.ts';
import { catalogChanged, type Generation, RECHECK_MS, type ServedCollections } from './served-collections.ts';

export interface CollectionRequestDeps {
  /** What is served: a request reads the generation current at its start, and nothing else, to its end. */
  readonly collections: ServedCollections;
  /** Where collection queries run: the read replica when there is one (DATABASE_READ_URL). */
  readonly reads: Database;
  /** Where links start (PUBLIC_URL, or the request's origin behind trusted proxies). */
  readonly config: LinkOrigin;
  readonly cursorSecret: string;
  readonly compressor: Compressor;
  /** The rate limit; absent: none (pagination tests, the bench's baseline). */
  readonly gate: Gate | undefined;
  /** Where a fault answered 500 goes. */
  readonly log: (error: unknown, c: Context) => void;
}

/** How the request was answered, before its settlement: a chunk, or an error. */
type Answer =
  | { readonly rendered: RenderedChunk; readonly unchanged: boolean; readonly counted: number | undefined }
  | { readonly problem: ApiError; readonly error: unknown };

/**
 * The price a request is admitted with: its prepared price; once admitted, the request bound to the rows its
 * client may read (or refused: a 401 or 403) and the count's units from the planner's estimate (asked for only
 * then, so that a declined request costs no planner work; bounded like the chunk's own queries); the count
 * settled at the rows it read (docs/reference/costs.md, "Counts").
 */
class CollectionCharge implements Charge {
  readonly units: number;
  readonly sending: number;
  /** The request as it is served: bound to its client's rows once admitted. */
  prepared: Prepared;
  private readonly reads: Database;
  private readonly preparer: Preparer;
  /** What the request bound to its client's rows costs more than it was admitted with (a read over several values of a row rule). */
  private extra = 0;

  constructor(prepared: Prepared, reads: Database, preparer: Preparer) {
    this.prepared = prepared;
    this.units = prepared.price.units;
    this.sending = prepared.price.sending;
    this.reads = reads;
    this.preparer = preparer;
  }

  settle(counted: number | undefined): number {
    return this.extra + countSettlement(this.prepared.price, counted);
  }

  complete(principal: Principal): number | Promise<number> {
    if (this.prepared.kind === 'refused') return 0;
    const bound = this.preparer.bind(this.prepared, principal);
    this.prepared = bound;
    // A read over several values of a row rule costs more than the price it was admitted with.
    const added = Math.max(0, bound.price.units - this.units);
    this.extra = added;
    if (!needsEstimate(bound)) return added;
    const planned = estimateItems(this.reads, bound.collection, bound.read.request.filters);
    // A number when the estimate is kept: the request waits for no more turns of the event loop than its statements take.
    if (typeof planned === 'number') return added + withEstimate(bound, planned);
    return withTimeout(planned, this.reads.queryDeadlineMs).then((estimate) => added + withEstimate(bound, estimate));
  }
}

/**
 * The request as its client may read it: a 401 up front for a collection that needs credentials when none
 * came (priced 1, like a 400); without a rate limiter, which says who a client is, every client is anonymous.
 */
function forClient(prepared: Prepared, authorization: string | undefined, gated: boolean, preparer: Preparer): Prepared {
  if (prepared.kind === 'refused') return prepared;
  if (authorization === undefined && needsCredentials(prepared.collection)) return refusedWith(credentialsNeeded(prepared.collection));
  if (gated) return prepared;
  try {
    return preparer.bind(prepared, ANONYMOUS);
  } catch (error) {
    if (error instanceof ApiError) return refusedWith(error);
    throw error;
  }
}

/** A statement (or the planner's estimate) met a changed catalog: the catalog is read again, and the request answered 503, never 500. */
function metChange(collections: ServedCollections, name: string, exchange: Exchange, error: unknown): ApiError {
  collections.changed(name, error);
  exchange.cause = 'collection';
  return collectionUnavailable(name, 1);
}

export function collectionRequests(deps: CollectionRequestDeps) {
  const { collections, reads, config, cursorSecret, compressor, gate, log } = deps;
  const executeDeps = { database: reads, cursorSecret };
  // The readings a Preparer keeps are of its generation's collections: a new generation, a new Preparer.
  let preparing: { readonly generation: Generation; readonly preparer: Preparer } | undefined;
  const preparerOf = (generation: Generation): Preparer => {
    if (preparing?.generation !== generation) preparing = { generation, preparer: new Preparer(generation.registry, cursorSecret) };
    return preparing.preparer;
  };

  return async function collectionRequest(c: Context): Promise<Response> {
    const exchange: Exchange = c.get('exchange');
    const request = c.req.raw;
    const name = c.req.param('collection')!;
    const generation = collections.current();
    const preparer = preparerOf(generation);

    // 1. prepare: the collection, its parameters, variant, plan and price; or the 400, 404 or 405 (the keys' name)
    // it answers, the 503 of a collection the catalog no longer serves as the file says, or the 401 of a collection
    // read only with credentials, priced 1.
    const client = clientOf(c, false);
    let read: Prepared;
    if (name === KEYS) read = refusedWith(notAllowed('POST'));
    else if (generation.unavailable.has(name)) {
      collections.asked(name);
      exchange.cause = 'collection';
      read = refusedWith(collectionUnavailable(name, RECHECK_MS / 1000));
    } else read = preparer.prepare(name, rawQueryOf(request.url));
    const charge = new CollectionCharge(forClient(read, client.authorization, gate !== undefined, preparer), reads, preparer);

    // 2. admit: the limiter's decision, and the request bound to the rows its client may read; a refusal (429,
    // 401, 403, built by the gate with its headers) is answered here as the error handler would answer it, as is
    // a planner's estimate that met a changed catalog (released by the gate, answered 503): thrown on, it would
    // unwind every middleware in front, a cost each refusal would pay.
    let admission: Admission | undefined;
    try {
      admission = gate === undefined ? undefined : await gate.admit(client, charge, exchange);
    } catch (error) {
      return exchange.problemAnswer(
        catalogChanged(error) ? metChange(collections, name, exchange, error) : problemOf(error, (fault) => log(fault, c)),
      );
    }
    const { prepared } = charge;

    // 3. execute, and render the chunk: its statements, within the request's budget of PostgreSQL time.
    const ifNoneMatch = c.req.header('if-none-match');
    let answer: Answer;
    try {
      if (prepared.kind === 'refused') throw prepared.error;
      const collectionUrl = `${baseUrl(request, config, exchange.peer)}${collectionPath(prepared.collection.name)}`;
      const chunk = await execute(prepared, executeDeps, collectionUrl, admission?.budget);
      const rendered = renderChunk(prepared.collection.name, chunk, cursorSecret, prepared.rows.key);
      answer = { rendered, unchanged: notModified(ifNoneMatch, rendered.etag), counted: chunk.counted };
    } catch (error) {
      const problem = catalogChanged(error) ? metChange(collections, name, exchange, error) : problemOf(error, (fault) => log(fault, c));
      answer = { problem, error };
    }

    // 4. settle: what it cost in the end, from how it was answered; the allowance after it goes in the headers.
    const limits =
      admission === undefined
        ? undefined
        : await gate!.settle(
            admission,
            'rendered' in answer
              ? {
                  status: answer.unchanged ? 304 : 200,
                  notModified: answer.unchanged && !matchesAny(ifNoneMatch),
                  counted: answer.counted,
                  error: undefined,
                }
              : { status: answer.problem.status, notModified: false, counted: undefined, error: answer.error },
          );

    // 5. respond: the chunk (or 304, or problem), its headers written once.
    if (!('rendered' in answer)) return exchange.problemAnswer(answer.problem, undefined, limits);
    exchange.written = true;
    const headers = { method: request.method, acceptEncoding: c.req.header('accept-encoding') };
    return respond(answer.rendered, answer.unchanged, headers, compressor, exchange.headers, limits);
  };
}
