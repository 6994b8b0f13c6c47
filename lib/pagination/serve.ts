// A collection query (docs/api.md, "Choosing the variant"): parse, pick the variant, validate every parameter, serve the chunk.
import type { Database } from '../../db/client.ts';
import { withTimeout } from '../http/deadline.ts';
import { baseUrl } from '../http/forwarding.ts';
import type { PendingHeaders } from '../http/response-headers.ts';
import { chunkResponse } from './chunk.ts';
import { cursorVariant } from './cursor.ts';
import { isFilterName, parseFilters } from './filters.ts';
import { linkBuilder } from './links.ts';
import { offsetVariant } from './offset.ts';
import { pageVariant } from './page.ts';
import { parseQueryString, type QueryParams, rawQueryOf } from './params.ts';
import type { Collection, VariantName } from './registry.ts';
import { parseSort, withTieBreaker } from './sort.ts';
import { timeVariant } from './time.ts';
import { checkParamsTaken, takes } from './variant-params.ts';
import { type QueryRequest, type Reading, selectVariant, type Variant } from './variants.ts';

const variants: Record<VariantName, Variant> = {
  offset: offsetVariant,
  page: pageVariant,
  cursor: cursorVariant,
  time: timeVariant,
};

export interface CollectionDeps {
  readonly database: Database;
  /** What baseUrl reads of the configuration (the public URL, the trusted proxies). */
  readonly config: Parameters<typeof baseUrl>[1];
  readonly cursorSecret: string;
}

/** A collection query read and checked as far as it can be without the database. */
export interface ReadQuery {
  readonly variant: Variant;
  readonly request: QueryRequest;
  /** The variant's plan of the chunk, and what it makes PostgreSQL read. */
  readonly plan: Reading;
}

/**
 * Picks the variant, checks what every variant shares (the parameters it takes, the filters, the sort), then
 * what the variant reads itself. A 400 (ApiError) on anything wrong. The handler serves the plan this
 * returns, and the cost rule charges it (lib/ratelimit/cost.ts).
 */
export function readQuery(collection: Collection, params: QueryParams, cursorSecret: string): ReadQuery {
  const { variant: name, cursor } = selectVariant(collection, params, cursorSecret);
  const variant = variants[name];
  checkParamsTaken(name, params.keys(), (param) => isFilterName(collection, param));
  const filters = parseFilters(collection, params);
  const sort = takes(name, 'sort') ? parseSort(collection, params) : withTieBreaker(collection.defaultSort);
  const request = { collection, params, filters, sort, cursor };
  return { variant, request, plan: variant.read(request) };
}

declare module 'hono' {
  /**
   * `readQuery`: the Hono context variable by which a middleware that has read the request's query already
   * (the rate limiter, whose cost rule charges its plan) hands that reading to the collection handler, so
   * the query string is parsed and read once: `c.set('readQuery', readQuery(…))`. Unset, the handler reads
   * it itself.
   */
  interface ContextVariableMap {
    readQuery: ReadQuery;
    /** The rows the chunk's count read, once served (ServeOptions.counted): the rate limiter settles the count's price by it. */
    counted: number;
  }
}

/** What serving a chunk takes beyond the request and its collection. */
export interface ServeOptions {
  /** The socket's remote address, which decides whether forwarded host and proto count. */
  readonly peer?: string | undefined;
  /**
   * This request's query as readQuery read it already (the context variable `readQuery`); when it is
   * absent, or of another collection, the query is read here.
   */
  readonly read?: ReadQuery | undefined;
  /** Headers the response carries besides its own (request id, CORS, rate limit: lib/http/response-headers.ts). */
  readonly headers?: PendingHeaders | undefined;
  /** Told the rows the chunk's count read, when it counted. */
  readonly counted?: (rows: number) => void;
}

export async function serveCollection(
  request: Request,
  collection: Collection,
  deps: CollectionDeps,
  options: ServeOptions = {},
): Promise<Response> {
  const { read } = options;
  const reading =
    read?.request.collection === collection ? read : readQuery(collection, parseQueryString(rawQueryOf(request.url)), deps.cursorSecret);
  const { variant, request: query, plan } = reading;
  const params = query.params;
  const collectionUrl = `${baseUrl(request, deps.config, options.peer)}/v1/${collection.name}`;
  const href = linkBuilder(collectionUrl, params);
  // The server cancels a query past its statement timeout; this also bounds the wait for a pool connection
  // and a connection that stopped answering: a 503, and the limiter releases the request's lease.
  const chunk = await withTimeout(
    variant.serve({ ...query, cursorSecret: deps.cursorSecret, database: deps.database, collectionUrl, href }, plan),
    deps.database.queryDeadlineMs,
  );
  if (chunk.counted !== undefined) options.counted?.(chunk.counted);
  return chunkResponse(collection.name, chunk, deps.cursorSecret, options.headers);
}
