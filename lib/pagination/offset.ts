// Offset-based pagination (docs/reference/api.md, "Parameters", "The chunk"): `limit` and `offset`, absolute positions.
import { asc, desc, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import type { Database } from '../../db/client.ts';
import { countItems, parseCountMode, type Size } from './count.ts';
import { type Filter, filterCondition, filtersKey, filterValues } from './filters.ts';
import { itemsOf } from './items.ts';
import type { Links } from './links.ts';
import { MAX_SAFE, parseInteger, parseSize } from './params.ts';
import type { Collection, SortKey } from './registry.ts';
import { collectionKey, literalLimit, shapeOf } from './shapes.ts';
import { runShape } from './shared-reads.ts';
import { orderBy, sortParam } from './sort.ts';
import { type ChunkRequest, defineVariant, type QueryRequest, type Reading } from './variants.ts';

export interface Positional {
  readonly items: Record<string, unknown>[];
  /** Whether an item follows the chunk: one row more than the chunk is fetched to know. */
  readonly more: boolean;
  readonly size: Size | undefined;
}

/**
 * The chunk query of a positional shape. Without an offset, the chunk's rows; with one (a placeholder), rows are
 * skipped in an inner query over raw columns and only the chunk's are projected outside it: otherwise
 * PostgreSQL computes every skipped row's epoch seconds (and other printed forms: lib/pagination/values.ts) too.
 */
function positionalQuery(
  database: Database,
  collection: Collection,
  filters: readonly Filter[],
  sort: readonly SortKey[],
  skips: boolean,
  pageSize: number,
) {
  const { drizzle } = database;
  const where = filterCondition(collection, filters);
  if (!skips) {
    return drizzle
      .select(collection.selection)
      .from(collection.table)
      .where(where)
      .orderBy(...orderBy(collection, sort))
      .limit(literalLimit(pageSize + 1));
  }
  const raw = Object.fromEntries([...collection.fields].map(([name, field]) => [name, field.column]));
  const chunk = drizzle
    .select(raw)
    .from(collection.table)
    .where(where)
    .orderBy(...orderBy(collection, sort))
    .limit(literalLimit(pageSize + 1))
    .offset(sql.placeholder('offset'))
    .as('chunk');
  const columns = chunk as unknown as Record<string, AnyPgColumn>;
  const selection = Object.fromEntries([...collection.fields].map(([name, field]) => [name, field.value.select(columns[name]!, name)]));
  return drizzle
    .select(selection)
    .from(chunk)
    .orderBy(...sort.map((key) => (key.descending ? desc(columns[key.field]!) : asc(columns[key.field]!))));
}

/** The items at [offset, offset + pageSize) in the request's order, and the size in the plan's count mode. */
export async function fetchPositional(request: ChunkRequest, plan: PositionalPlan): Promise<Positional> {
  const { offset, pageSize: limit, count, estimate } = plan;
  const { collection, database, budget, filters, sort } = request;
  // The first chunk is a shape of its own: it skips nothing, and its plan needs no guess at the offset.
  const skips = offset > 0;
  const key = `${collectionKey(collection)}|p|${filtersKey(filters)}|${sortParam(sort)}|${skips ? 'o' : ''}|${limit}`;
  const shape = shapeOf(database, key, () => positionalQuery(database, collection, filters, sort, skips, limit));
  const values: Record<string, unknown> = skips ? { offset } : {};
  filterValues(collection, filters, values);
  const [rows, size] = await Promise.all([
    runShape(database, shape, values, budget),
    countItems(database, collection, filters, count, estimate, budget),
  ]);
  return { items: itemsOf(collection, rows, limit), more: rows.length > limit, size };
}

/** The offset of the last chunk on the grid of `offset` (offset + k × limit), or 0. */
function lastOffset(offset: number, limit: number, size: number): number {
  const phase = offset % limit;
  if (size <= phase) return 0;
  return phase + Math.floor((size - 1 - phase) / limit) * limit;
}

/** A chunk at absolute positions: the offset and page variants' plan. */
export type PositionalPlan = Reading;

/** The fields that say how big the set is: the size, and whether it is a count or the planner's estimate. */
export function sizeFields(name: string, value: number | undefined, size: Size | undefined): Record<string, unknown> {
  return value === undefined || size === undefined ? {} : { [name]: value, count: size.estimated ? 'estimated' : 'exact' };
}

/** The plan of a positional chunk of `pageSize` rows from `offset`, in the request's order. */
export function positionalPlan(request: QueryRequest, offset: number, pageSize: number): PositionalPlan {
  return { pageSize, offset, count: parseCountMode(request.params), firstKey: request.sort[0]!.field };
}

export const offsetVariant = defineVariant({
  name: 'offset',
  read(request) {
    const { collection, params } = request;
    const offset = params.get('offset');
    const limit = parseSize(params, 'limit', collection.pageSize);
    return positionalPlan(request, offset === undefined ? 0 : parseInteger('offset', offset, 0, MAX_SAFE), limit);
  },
  async serve(request, plan) {
    const { href } = request;
    const { pageSize: limit, offset } = plan;
    const { items, more, size } = await fetchPositional(request, plan);
    // The next offset is the current offset plus the current limit (docs/reference/api.md, "Links").
    const links: Links = {
      self: href({ limit, offset }),
      next: more ? href({ limit, offset: offset + limit }) : undefined,
      prev: offset > 0 ? href({ limit, offset: Math.max(0, offset - limit) }) : undefined,
      first: href({ limit, offset: 0 }),
      last: size !== undefined ? href({ limit, offset: lastOffset(offset, limit, size.size) }) : undefined,
    };
    const fields = { offset, limit, ...sizeFields('size', size?.size, size) };
    return { fields, items, links, counted: size?.counted };
  },
});
