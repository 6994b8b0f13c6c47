// What a request costs in allowance units (SPEC.md 8: "a cost weighted by the amount of data queried").
import { ApiError } from './errors.ts';
import { MAX_SAFE, parseInteger, parseQueryString, type QueryParams } from './params.ts';
import { splitSort, type Collection } from './registry.ts';
import { parseSort } from './sort.ts';

// The largest cost handed to the database, whose rate_decide takes an int4 and caps it at the allowance.
const MAX_COST = 2 ** 31 - 1;

/** What the chunk makes PostgreSQL read, as far as the cost rule cares. */
interface Reading {
  /** Whether the chunk carries an exact count (offset or page variant, `count` absent or `exact`). */
  readonly exactCount: boolean;
  /** The rows skipped before the chunk (offset and page variants; 0 for the keyset variants). */
  readonly offset: number;
  /** The first key of the order, which decides whether an index serves it; undefined: not known. */
  readonly firstKey: string | undefined;
}

/**
 * The cost of a collection query by its collection's rule (CostRule in lib/registry.ts): one unit per
 * started `itemsPerUnit` items of the page size asked for, plus `exactCount` for an exact count, plus
 * one unit per whole `indexed[key]` rows an offset skips along the index of the order's first key, plus
 * `unindexedSort` when that key has no index.
 *
 * The allowance is charged before the request is validated (API.md), so this reads the raw query
 * leniently and never throws: anything it cannot read costs 1 unit, the price of a 400. The cap at
 * the tier's whole allowance is applied by the database, which knows the tier.
 */
export function requestCost(collection: Collection | undefined, rawQuery: string): number {
  if (!collection) return 1;
  try {
    return Math.min(costOf(collection, parseQueryString(rawQuery)), MAX_COST);
  } catch (error) {
    // The parsers the handlers use refuse what they would refuse: such a request is a 400.
    if (error instanceof ApiError) return 1;
    throw error;
  }
}

function costOf(collection: Collection, params: QueryParams): number {
  const { cost } = collection;
  const limit = params.get('limit');
  const pageSizeParam = params.get('page-size');
  if (limit !== undefined && pageSizeParam !== undefined) return 1;
  const size = limit ?? pageSizeParam;
  const pageSize = size === undefined ? collection.pageSize.default : parseInteger('page-size', size, 1, collection.pageSize.max);
  const count = params.get('count') ?? 'exact';
  if (!['exact', 'estimated', 'none'].includes(count)) return 1;
  const reading = readingOf(collection, params, pageSize, count === 'exact');
  if (reading === undefined) return 1;
  let units = Math.ceil(pageSize / cost.itemsPerUnit) + (reading.exactCount ? cost.exactCount : 0);
  const { firstKey, offset } = reading;
  if (firstKey === undefined) return units;
  const indexed = Object.hasOwn(cost.indexed, firstKey);
  // No index: every chunk reads and sorts the filtered rows, then skips the offset in the sorted output,
  // which is charged as along the slowest declared index.
  if (!indexed) units += cost.unindexedSort ?? 0;
  units += Math.floor(offset / (indexed ? cost.indexed[firstKey]! : Math.min(...Object.values(cost.indexed))));
  return units;
}

/**
 * The variant the request selects (as selectVariant in lib/variant.ts picks it), and what it reads;
 * undefined when the collection does not offer that variant, so the request is a 400.
 */
function readingOf(collection: Collection, params: QueryParams, pageSize: number, countExact: boolean): Reading | undefined {
  const time = collection.timeField;
  const cursor = params.get('cursor');
  if (cursor !== undefined) return keyset(cursorFirstKey(collection, cursor));
  if (params.has('since_id')) return keyset('id');
  if (params.has('before') || params.has('after')) return keyset(time);
  let variant = collection.defaultVariant;
  if (params.has('limit') || params.has('offset')) variant = 'offset';
  else if (params.has('page')) variant = 'page';
  else if (params.has('page-size')) {
    variant = collection.defaultVariant === 'time' ? 'time' : collection.variants.includes('cursor') ? 'cursor' : 'page';
  }
  // A variant the collection does not offer is a 400.
  if (!collection.variants.includes(variant)) return undefined;
  if (variant === 'time') return keyset(time);
  const firstKey = parseSort(collection, params)[0]!.field;
  if (variant === 'cursor') return keyset(firstKey);
  return { exactCount: countExact, offset: positionalOffset(params, variant, pageSize), firstKey };
}

function keyset(firstKey: string | undefined): Reading {
  return { exactCount: false, offset: 0, firstKey };
}

function positionalOffset(params: QueryParams, variant: 'offset' | 'page', pageSize: number): number {
  if (variant === 'offset') {
    const offset = params.get('offset');
    return offset === undefined ? 0 : parseInteger('offset', offset, 0, MAX_SAFE);
  }
  const page = params.get('page');
  return page === undefined ? 0 : parseInteger('page', page, 0, Math.floor(MAX_SAFE / pageSize)) * pageSize;
}

/**
 * The first key of the order a cursor carries, read without checking its signature (the secret is not at
 * hand here): a forged cursor is refused before any data is read, and then it cost what it claimed.
 * Unreadable: undefined, so it adds nothing.
 */
function cursorFirstKey(collection: Collection, token: string): string | undefined {
  try {
    const payload: unknown = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'));
    if (typeof payload !== 'object' || payload === null) return undefined;
    const { v, s } = payload as Record<string, unknown>;
    if (v === 'time') return collection.timeField;
    const first = v === 'cursor' && typeof s === 'string' ? splitSort(s)[0]!.field : undefined;
    if (first !== undefined && collection.fields.has(first)) return first;
  } catch {
    // Not JSON: the request is a 400.
  }
  return undefined;
}
