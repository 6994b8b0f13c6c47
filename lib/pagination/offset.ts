// Offset-based pagination (docs/api.md, "Parameters", "The chunk"): `limit` and `offset`, absolute positions.
import { and, asc, desc } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { chunkResponse } from './chunk.ts';
import { type CountMode, countItems, parseCountMode } from './count.ts';
import { filterCondition } from './filters.ts';
import type { Links } from './links.ts';
import { MAX_SAFE, parseInteger, parseSize } from './params.ts';
import { orderBy } from './sort.ts';
import { timestampText } from './timestamps.ts';
import { type ChunkRequest, defineVariant, type QueryRequest, type Reading } from './variants.ts';

export interface Positional {
  readonly items: Record<string, unknown>[];
  /** Whether an item follows the chunk: one row more than the chunk is fetched to know. */
  readonly more: boolean;
  readonly size: number | undefined;
}

/** The items at [offset, offset + pageSize) in the request's order, and the size in the plan's count mode. */
export async function fetchPositional(request: ChunkRequest, plan: PositionalPlan): Promise<Positional> {
  const { offset, pageSize: limit, countMode } = plan;
  const { collection, database, filters, sort } = request;
  const where = and(filterCondition(collection, filters));
  // Skip rows in an inner query over raw columns, and format only the chunk's rows outside it:
  // otherwise PostgreSQL formats every skipped row's timestamps too (4x slower at offset 900,000).
  const raw = Object.fromEntries([...collection.fields].map(([name, field]) => [name, field.column]));
  const chunk = database.drizzle
    .select(raw)
    .from(collection.table)
    .where(where)
    .orderBy(...orderBy(collection, sort))
    .limit(limit + 1)
    .offset(offset)
    .as('chunk');
  const columns = chunk as unknown as Record<string, AnyPgColumn>;
  const selection = Object.fromEntries(
    [...collection.fields].map(([name, field]) => [
      name,
      field.type === 'timestamp' ? timestampText(columns[name]!).as(name) : columns[name]!,
    ]),
  );
  const rows = database.drizzle
    .select(selection)
    .from(chunk)
    .orderBy(...sort.map((key) => (key.descending ? desc(columns[key.field]!) : asc(columns[key.field]!))));
  const [items, size] = await Promise.all([rows, countItems(database, collection, where, countMode)]);
  const more = items.length > limit;
  return { items: more ? items.slice(0, limit) : items, more, size };
}

/** The offset of the last chunk on the grid of `offset` (offset + k × limit), or 0. */
function lastOffset(offset: number, limit: number, size: number): number {
  const phase = offset % limit;
  if (size <= phase) return 0;
  return phase + Math.floor((size - 1 - phase) / limit) * limit;
}

/** A chunk at absolute positions: the offset and page variants' plan. */
export interface PositionalPlan extends Reading {
  readonly countMode: CountMode;
}

/** The plan of a positional chunk of `pageSize` rows from `offset`, in the request's order. */
export function positionalPlan(request: QueryRequest, offset: number, pageSize: number): PositionalPlan {
  const countMode = parseCountMode(request.params);
  return { pageSize, offset, countMode, exactCount: countMode === 'exact', firstKey: request.sort[0]!.field };
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
    const { collection, href } = request;
    const { pageSize: limit, offset } = plan;
    const { items, more, size } = await fetchPositional(request, plan);
    // The next offset is the current offset plus the current limit (docs/api.md, "Links").
    const links: Links = {
      self: href({ limit, offset }),
      next: more ? href({ limit, offset: offset + limit }) : undefined,
      prev: offset > 0 ? href({ limit, offset: Math.max(0, offset - limit) }) : undefined,
      first: href({ limit, offset: 0 }),
      last: size !== undefined ? href({ limit, offset: lastOffset(offset, limit, size) }) : undefined,
    };
    const fields = size === undefined ? { offset, limit } : { offset, limit, size };
    return chunkResponse(collection.name, fields, items, links);
  },
});
