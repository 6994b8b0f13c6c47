// GET /v1/{collection}, in five stages over values: prepare → admit → execute → settle → respond
// (docs/reference/api.md; docs/reference/costs.md, "The rule"). The route handler is this function; nothing travels beside it.
import type { Context } from 'hono';
import type { Database } from '../../db/client.ts';
import type { Compressor } from '../http/compression.ts';
import { matchesAny, notModified } from '../http/conditional.ts';
import { withTimeout } from '../http/deadline.ts';
import { type ApiError, notAllowed, problemOf, problemResponse } from '../http/errors.ts';
import type { Exchange } from '../http/exchange.ts';
import { baseUrl, type LinkOrigin } from '../http/forwarding.ts';
import { collectionPath, KEYS } from '../http/routes.ts';
import { type RenderedChunk, renderChunk } from '../pagination/chunk.ts';
import { estimateItems } from '../pagination/count.ts';
import { execute } from '../pagination/execute.ts';
import { rawQueryOf } from '../pagination/params.ts';
import { needsEstimate, type Prepared, Preparer, refusedWith, withEstimate } from '../pagination/prepare.ts';
import { countSettlement } from '../pagination/price.ts';
import type { Registry } from '../pagination/registry.ts';
import { respond } from '../pagination/respond.ts';
import type { Charge, Gate } from '../ratelimit/gate.ts';
import { clientOf } from './limited-routes.ts';

export interface CollectionRequestDeps {
  readonly registry: Registry;
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
 * The price a request is admitted with: its prepared price, the count's units from the planner's estimate once
 * admitted (asked for only then, so that a declined request costs no planner work; bounded like the chunk's own
 * queries), the count settled at the rows it read (docs/reference/costs.md, "Counts").
 */
function chargeOf(prepared: Prepared, reads: Database): Charge {
  const { price } = prepared;
  const settle = (counted: number | undefined) => countSettlement(price, counted);
  if (!needsEstimate(prepared)) return { units: price.units, sending: price.sending, settle };
  const complete = () => {
    const planned = estimateItems(reads, prepared.collection, prepared.read.request.filters);
    // A number when the estimate is kept: the request waits for no more turns of the event loop than its statements take.
    if (typeof planned === 'number') return withEstimate(prepared, planned);
    return withTimeout(planned, reads.queryDeadlineMs).then((estimate) => withEstimate(prepared, estimate));
  };
  return { units: price.units, sending: price.sending, settle, complete };
}

export function collectionRequests(deps: CollectionRequestDeps) {
  const { registry, reads, config, cursorSecret, compressor, gate, log } = deps;
  const executeDeps = { database: reads, cursorSecret };
  const preparer = new Preparer(registry, cursorSecret);

  return async function collectionRequest(c: Context): Promise<Response> {
    const exchange: Exchange = c.get('exchange');
    const request = c.req.raw;
    const name = c.req.param('collection')!;

    // 1. prepare: the collection, its parameters, variant, plan and price; or the 400, 404 or 405 (the keys' name)
    // it answers, priced 1.
    const prepared = name === KEYS ? refusedWith(notAllowed('POST')) : preparer.prepare(name, rawQueryOf(request.url));

    // 2. admit: the limiter's decision; a refusal (429, 401, 403) is thrown, answered by the one error handler.
    const admission = gate === undefined ? undefined : await gate.admit(clientOf(c, false), chargeOf(prepared, reads), exchange);

    // 3. execute, and render the chunk: its statements, within the request's budget of PostgreSQL time.
    const ifNoneMatch = c.req.header('if-none-match');
    let answer: Answer;
    try {
      if (prepared.kind === 'refused') throw prepared.error;
      const collectionUrl = `${baseUrl(request, config, exchange.peer)}${collectionPath(prepared.collection.name)}`;
      const chunk = await execute(prepared, executeDeps, collectionUrl, admission?.budget);
      const rendered = renderChunk(prepared.collection.name, chunk, cursorSecret);
      answer = { rendered, unchanged: notModified(ifNoneMatch, rendered.etag), counted: chunk.counted };
    } catch (error) {
      answer = { problem: problemOf(error, (fault) => log(fault, c)), error };
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
    exchange.written = true;
    if (!('rendered' in answer)) return problemResponse(answer.problem, exchange.id, undefined, exchange.headers, limits);
    const headers = { method: request.method, acceptEncoding: c.req.header('accept-encoding') };
    return respond(answer.rendered, answer.unchanged, headers, compressor, exchange.headers, limits);
  };
}
