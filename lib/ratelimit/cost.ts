// What a request costs in allowance units (docs/rate-limit.md, "Cost").

import { ApiError } from '../http/errors.ts';
import { parseQueryString } from '../pagination/params.ts';
import type { Collection } from '../pagination/registry.ts';
import { readQuery } from '../pagination/serve.ts';
import type { Reading } from '../pagination/variants.ts';

// The largest cost handed to the database, whose rate_decide takes an int4 and caps it at the allowance.
const MAX_COST = 2 ** 31 - 1;

/**
 * The cost of a collection query by its collection's rule (CostRule in lib/pagination/registry.ts): one unit per
 * started `itemsPerUnit` items of the page size asked for, plus `exactCount` for an exact count, plus
 * one unit per whole `indexed[key]` rows an offset skips along the index of the order's first key, plus
 * `unindexedSort` when that key has no index.
 *
 * The allowance is charged before the request is served (docs/rate-limit.md, "Malformed requests cost 1"),
 * so the cost is the price of the plan the handler serves: readQuery reads the request (variant, parameters,
 * filters, sort, sizes, positions, cursor) exactly as the handler does, and anything the handler would refuse
 * with a 400 costs 1 unit. It never throws but for a bug. The cap at the tier's whole allowance is applied by the database, which knows the tier.
 */
export function requestCost(collection: Collection | undefined, rawQuery: string, cursorSecret: string): number {
  if (!collection) return 1;
  try {
    return Math.min(costOf(collection, readQuery(collection, parseQueryString(rawQuery), cursorSecret).plan), MAX_COST);
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
