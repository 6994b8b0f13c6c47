// What a collection query costs in allowance units (docs/reference/costs.md, "The rule"), read once from the request.

import type { Collection } from './registry.ts';
import type { Reading } from './variants.ts';

// The largest cost handed to the database, whose rate_decide takes an int4 and caps it at the allowance.
const MAX_COST = 2 ** 31 - 1;

/**
 * A request's price, and the part of it that pays for sending the items. A 304 sends none, so those units
 * are given back; the rest pays for rows read, skipped or counted, which a 304 reads all the same
 * (docs/reference/costs.md, "Conditional requests").
 */
export interface Price {
  readonly units: number;
  readonly sending: number;
  /** The units of `units` that pay for counting, priced from the planner's estimate; settled once counted. */
  readonly counting: number;
  /** Rows a count reads per unit (the collection's `countedPerUnit`). */
  readonly countedPerUnit: number;
}

/** What a query the handler refuses costs: 1 unit (docs/reference/costs.md, "Malformed requests cost 1"). */
export const REFUSED: Price = { units: 1, sending: 1, counting: 0, countedPerUnit: 1 };

/**
 * How many more units a request costs once its count has read `counted` rows than were charged for
 * counting up front (negative: units to give back): the count settles at what it read.
 */
export function countSettlement(price: Price, counted: number | undefined): number {
  return counted === undefined ? 0 : Math.floor(counted / price.countedPerUnit) - price.counting;
}

/**
 * The price of a collection query by its collection's rule (CostRule in lib/pagination/registry.ts): one unit
 * per started `itemsPerUnit` items of the page size asked for, plus one per whole `countedPerUnit` rows a
 * count reads, plus one per whole `indexed[key]` rows an offset skips along the index of the order's first
 * key, plus `unindexedSort` when that key has no index (a query refused costs REFUSED, 1 unit). A count is
 * priced from the plan's `estimate`, the planner's estimate of the filtered set (needsEstimate): an exact count reads
 * them all, the default one only those under the collection's threshold. The cap at the tier's whole
 * allowance is applied by the database, which knows the tier.
 */
export function queryPrice(collection: Collection, plan: Reading, scattered = false): Price {
  const { cost, countThreshold } = collection;
  const estimate = plan.estimate ?? 0;
  const sending = Math.ceil(plan.pageSize / cost.itemsPerUnit);
  const { count } = plan;
  const rows = count === 'exact' || (count === 'auto' && estimate < countThreshold) ? estimate : 0;
  const counting = Math.floor(rows / cost.countedPerUnit);
  const units = Math.min(sending + counting + readingUnits(collection, plan, scattered), MAX_COST);
  return { units, sending, counting, countedPerUnit: cost.countedPerUnit };
}

/**
 * The units that pay for what PostgreSQL reads beyond the items and the count: the rows skipped, a sort.
 * `scattered`: a row rule matches several values (an array claim), so the rows of the order are in as many
 * ranges of the index that leads with the rule's column, which PostgreSQL reads and sorts as if none served it.
 */
function readingUnits(collection: Collection, { offset, firstKey }: Reading, scattered: boolean): number {
  const { cost } = collection;
  let units = 0;
  const indexed = !scattered && Object.hasOwn(cost.indexed, firstKey);
  // No index: every chunk reads and sorts the filtered rows, then skips the offset in the sorted output,
  // which is charged as along the slowest declared index.
  if (!indexed) units += cost.unindexedSort ?? 0;
  units += Math.floor(offset / (indexed ? cost.indexed[firstKey]! : Math.min(...Object.values(cost.indexed))));
  return units;
}
