// A collection query (docs/api.md, "Choosing the variant"): parse, pick the variant, validate every parameter, serve the chunk.
import type { Database } from '../../db/client.ts';
import type { Config } from '../http/config.ts';
import { withTimeout } from '../http/deadline.ts';
import { baseUrl } from '../http/forwarding.ts';
import { cursorVariant } from './cursor.ts';
import type { CursorPayload } from './cursor-token.ts';
import { type Filter, isFilterName, parseFilters } from './filters.ts';
import { linkBuilder } from './links.ts';
import { offsetVariant } from './offset.ts';
import { pageVariant } from './page.ts';
import { parseQueryString, type QueryParams, rawQueryOf } from './params.ts';
import type { Collection, SortKey, VariantName } from './registry.ts';
import { parseSort, withTieBreaker } from './sort.ts';
import { timeVariant } from './time.ts';
import { checkParamsTaken, selectVariant, takes, type Variant } from './variants.ts';

const variants: Record<VariantName, Variant> = {
  offset: offsetVariant,
  page: pageVariant,
  cursor: cursorVariant,
  time: timeVariant,
};

export interface CollectionDeps {
  readonly database: Database;
  readonly config: Config;
  readonly cursorSecret: string;
}

/** A collection query read and checked as far as it can be without the database. */
export interface ReadQuery {
  readonly variant: Variant;
  /** The verified cursor, when one was sent. */
  readonly cursor: CursorPayload | undefined;
  readonly filters: readonly Filter[];
  readonly sort: readonly SortKey[];
}

/**
 * Picks the variant and checks what every variant shares: the parameters it takes, the filters, the sort.
 * A 400 (ApiError) on anything wrong. The handler serves what this reads, and the cost rule charges it.
 */
export function readQuery(collection: Collection, params: QueryParams, cursorSecret: string): ReadQuery {
  const { variant: name, cursor } = selectVariant(collection, params, cursorSecret);
  const variant = variants[name];
  checkParamsTaken(name, params.keys(), (param) => isFilterName(collection, param));
  const filters = parseFilters(collection, params);
  const sort = takes(name, 'sort') ? parseSort(collection, params) : withTieBreaker(collection.defaultSort);
  return { variant, cursor, filters, sort };
}

/** `peer`: the socket's remote address, which decides whether forwarded host and proto count. */
export async function serveCollection(
  request: Request,
  collection: Collection,
  deps: CollectionDeps,
  peer: string | undefined,
): Promise<Response> {
  const params = parseQueryString(rawQueryOf(request.url));
  const { variant, cursor, filters, sort } = readQuery(collection, params, deps.cursorSecret);
  const collectionUrl = `${baseUrl(request, deps.config, peer)}/v1/${collection.name}`;
  const href = linkBuilder(collectionUrl, params);
  // The server cancels a query past its statement timeout; this also bounds the wait for a pool connection
  // and a connection that stopped answering: a 503, and the limiter releases the request's lease.
  return withTimeout(
    variant.serve({
      collection,
      params,
      filters,
      sort,
      cursor,
      cursorSecret: deps.cursorSecret,
      database: deps.database,
      collectionUrl,
      href,
    }),
    deps.database.queryDeadlineMs,
  );
}
