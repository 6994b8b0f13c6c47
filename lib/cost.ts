// What a request costs in allowance units (SPEC.md 8: "a cost weighted by the amount of data queried").
import { parseQueryString } from './params.ts';
import type { Collection } from './registry.ts';

const keysetParams = ['cursor', 'since_id', 'before', 'after'];
const positionalParams = ['limit', 'offset', 'page'];

/**
 * The cost of a collection query by its collection's rule: one unit per started `itemsPerUnit` items
 * of the page size asked for (the default page size when none is given), plus `exactCount` when the
 * chunk will carry an exact count (offset or page variant, `count` absent or `exact`).
 *
 * The allowance is charged before the request is validated (API.md), so this reads the raw query
 * leniently and never throws: anything it cannot read costs 1 unit, the price of a 400. The cap at
 * the tier's whole allowance is applied by the database, which knows the tier.
 */
export function requestCost(collection: Collection | undefined, rawQuery: string): number {
  if (!collection) return 1;
  let params: ReadonlyMap<string, string>;
  try {
    params = parseQueryString(rawQuery);
  } catch {
    return 1;
  }
  const limit = params.get('limit');
  const pageSizeParam = params.get('page-size');
  if (limit !== undefined && pageSizeParam !== undefined) return 1;
  const sizeText = limit ?? pageSizeParam;
  let size = collection.pageSize.default;
  if (sizeText !== undefined) {
    if (!/^\d{1,6}$/.test(sizeText)) return 1;
    size = Number(sizeText);
    if (size < 1 || size > collection.pageSize.max) return 1;
  }
  const count = params.get('count') ?? 'exact';
  if (!['exact', 'estimated', 'none'].includes(count)) return 1;
  const units = Math.ceil(size / collection.cost.itemsPerUnit);
  return units + (count === 'exact' && countsExactly(collection, params) ? collection.cost.exactCount : 0);
}

/** Whether the request selects the offset or page variant (API.md, "Choosing the variant"). */
function countsExactly(collection: Collection, params: ReadonlyMap<string, string>): boolean {
  if (keysetParams.some((name) => params.has(name))) return false;
  if (positionalParams.some((name) => params.has(name))) return true;
  if (params.has('page-size')) return false; // the first chunk of the keyset variant
  return collection.defaultVariant === 'offset' || collection.defaultVariant === 'page';
}
