// A collection query (docs/api.md, "Choosing the variant"): parse, pick the variant, validate every parameter, serve the chunk.
import type { Database } from '../../db/client.ts';
import { withTimeout } from '../http/deadline.ts';
import { ApiError } from '../http/errors.ts';
import { baseUrl, type LinkOrigin } from '../http/forwarding.ts';
import type { PendingHeaders } from '../http/response-headers.ts';
import { collectionPath } from '../http/routes.ts';
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
  /** Where links start (PUBLIC_URL, or the request's origin behind trusted proxies). */
  readonly config: LinkOrigin;
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
 * returns, and the cost rule charges it (lib/pagination/price.ts).
 */
export function readQuery(collection: Collection, params: QueryParams, cursorSecret: string): ReadQuery {
  const { variant: name, cursor } = selectVariant(collection, params, cursorSecret);
  const variant = variants[name];
  checkParamsTaken(name, params.keys(), (param) => isFilterName(collection, param));
  const filters = parseFilters(collection, params);
  const sort = takes(name, 'sort') ? parseSort(collection, params) : withTieBreaker(collection.defaultSort, collection.key);
  const request = { collection, params, filters, sort, cursor };
  return { variant, request, plan: variant.read(request) };
}

declare module 'hono' {
  /**
   * `collectionQuery`: the Hono context variable by which the step that read the request's query before the
   * rate limiter (whose cost rule prices its plan: lib/service/app.ts) hands that reading, or the 400 it
   * answers, to the collection handler, so that the query string is parsed and read once. Unset, the
   * handler reads it itself.
   */
  interface ContextVariableMap {
    collectionQuery: CollectionQuery;
    /** The rows the chunk's count read, once served (ServeOptions.counted): the rate limiter settles the count's price by it. */
    counted: number;
  }
}

/** A collection query read once (lib/pagination/price.ts, readCollectionQuery): its reading, or the 400 it answers. */
interface CollectionQuery {
  readonly collection: Collection;
  readonly read: ReadQuery | ApiError;
}

/** What serving a chunk takes beyond the request and its collection. */
export interface ServeOptions {
  /** The socket's remote address, which decides whether forwarded host and proto count. */
  readonly peer?: string | undefined;
  /**
   * This request's query as it was read already (the context variable `collectionQuery`): served as read, or
   * its 400 thrown; when it is absent, or of another collection, the query is read here.
   */
  readonly read?: CollectionQuery | undefined;
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
    read?.collection === collection ? read.read : readQuery(collection, parseQueryString(rawQueryOf(request.url)), deps.cursorSecret);
  if (reading instanceof ApiError) throw reading;
  const { variant, request: query, plan } = reading;
  const params = query.params;
  const collectionUrl = `${baseUrl(request, deps.config, options.peer)}${collectionPath(collection.name)}`;
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
