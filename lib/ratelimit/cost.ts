// What a request costs in allowance units (docs/rate-limit.md, "Cost").

import { ApiError } from '../http/errors.ts';
import { parseCountMode } from '../pagination/count.ts';
import { readOffset } from '../pagination/offset.ts';
import { readPage } from '../pagination/page.ts';
import { parseQueryString, parseSize } from '../pagination/params.ts';
import { type Collection, splitSort } from '../pagination/registry.ts';
import { readQuery } from '../pagination/serve.ts';

// The largest cost handed to the database, whose rate_decide takes an int4 and caps it at the allowance.
const MAX_COST = 2 ** 31 - 1;

/** What the chunk makes PostgreSQL read, as far as the cost rule cares. */
interface Reading {
  readonly pageSize: number;
  /** Whether the chunk carries an exact count (offset or page variant, `count` absent or `exact`). */
  readonly exactCount: boolean;
  /** The rows skipped before the chunk (offset and page variants; 0 for the keyset variants). */
  readonly offset: number;
  /** The first key of the order, which decides whether an index serves it. */
  readonly firstKey: string;
}

/**
 * The cost of a collection query by its collection's rule (CostRule in lib/pagination/registry.ts): one unit per
 * started `itemsPerUnit` items of the page size asked for, plus `exactCount` for an exact count, plus
 * one unit per whole `indexed[key]` rows an offset skips along the index of the order's first key, plus
 * `unindexedSort` when that key has no index.
 *
 * The allowance is charged before the request is served (docs/rate-limit.md, "Malformed requests cost 1"), so the query is read here by the same
 * functions the handler uses (variant, parameters, filters, sort, sizes, cursor signature): what is charged
 * is what is served, and anything the handler would refuse with a 400 costs 1 unit. It never throws but
 * for a bug. The cap at the tier's whole allowance is applied by the database, which knows the tier.
 */
export function requestCost(collection: Collection | undefined, rawQuery: string, cursorSecret: string): number {
  if (!collection) return 1;
  try {
    return Math.min(costOf(collection, reading(collection, rawQuery, cursorSecret)), MAX_COST);
  } catch (error) {
    if (error instanceof ApiError) return 1; // the request is a 400
    throw error;
  }
}

function costOf(collection: Collection, { pageSize, exactCount, offset, firstKey }: Reading): number {
  const { cost } = collection;
  let units = Math.ceil(pageSize / cost.itemsPerUnit) + (exactCount ? cost.exactCount : 0);
  const indexed = Object.hasOwn(cost.indexed, firstKey);
  // No index: every chunk reads and sorts the filtered rows, then skips the offset in the sorted output,
  // which is charged as along the slowest declared index.
  if (!indexed) units += cost.unindexedSort ?? 0;
  units += Math.floor(offset / (indexed ? cost.indexed[firstKey]! : Math.min(...Object.values(cost.indexed))));
  return units;
}

/** What the request makes PostgreSQL read; throws the handler's own 400 when it is malformed. */
function reading(collection: Collection, rawQuery: string, cursorSecret: string): Reading {
  const params = parseQueryString(rawQuery);
  const { variant, cursor, sort } = readQuery(collection, params, cursorSecret);
  switch (variant.name) {
    case 'offset': {
      const { limit, offset } = readOffset(collection, params);
      return { pageSize: limit, exactCount: parseCountMode(params) === 'exact', offset, firstKey: sort[0]!.field };
    }
    case 'page': {
      const { page, pageSize } = readPage(collection, params);
      return { pageSize, exactCount: parseCountMode(params) === 'exact', offset: page * pageSize, firstKey: sort[0]!.field };
    }
    case 'time':
      return keyset(collection, params, collection.timeField!);
    case 'cursor': {
      // A chunk after the first follows the order its (verified) cursor carries; since_id walks by id.
      const carried = typeof cursor?.s === 'string' ? splitSort(cursor.s)[0]!.field : undefined;
      return keyset(collection, params, params.has('since_id') ? 'id' : (carried ?? sort[0]!.field));
    }
  }
}

function keyset(collection: Collection, params: ReturnType<typeof parseQueryString>, firstKey: string): Reading {
  return { pageSize: parseSize(params, 'page-size', collection.pageSize), exactCount: false, offset: 0, firstKey };
}
