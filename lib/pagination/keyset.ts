// What the keyset variants (cursor, time) share: the "after this position" SQL, the chunk query, bound filters, links.
import { and, type SQL, sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { ApiError, invalidCursor } from '../http/errors.ts';
import { type CursorPayload, encodeCursor } from './cursor-token.ts';
import { type Filter, filterCondition, filterParam, parseFilters } from './filters.ts';
import { linkBuilder } from './links.ts';
import { parseSize } from './params.ts';
import type { Collection, FieldType, SortKey } from './registry.ts';
import { orderBy } from './sort.ts';
import { isTimestampText, timestampValue } from './timestamps.ts';
import type { ChunkRequest, QueryRequest } from './variants.ts';

/** One value of a position: a number for integer fields, text for text and timestamp fields. */
export type KeyValue = string | number;

export type Item = Record<string, unknown>;

/** A value as it goes into SQL: timestamps as text cast to timestamptz. */
export function keyLiteral(type: FieldType, value: KeyValue): SQL {
  return type === 'timestamp' ? timestampValue(value as string) : sql`${value}`;
}

/** Whether a value read back from a cursor has the shape its field needs. */
export function isKeyValue(type: FieldType, value: unknown): value is KeyValue {
  switch (type) {
    case 'integer':
    case 'bigint':
      return Number.isSafeInteger(value);
    case 'timestamp':
      return isTimestampText(value);
    case 'text':
      return typeof value === 'string';
  }
}

/** Consecutive sort keys of one direction: one row comparison. */
interface Group {
  readonly columns: SQL[];
  readonly values: SQL[];
  readonly descending: boolean;
}

function tuple(parts: SQL[]): SQL {
  return parts.length === 1 ? parts[0]! : sql`(${sql.join(parts, sql`, `)})`;
}

function compare(group: Group, strict: boolean): SQL {
  const op = group.descending ? (strict ? '<' : '<=') : strict ? '>' : '>=';
  return sql`${tuple(group.columns)} ${sql.raw(op)} ${tuple(group.values)}`;
}

// (g0 strictly past) or (g0 equal and the rest past), recursively.
function past(groups: readonly Group[]): SQL {
  const [first, ...rest] = groups as [Group, ...Group[]];
  if (rest.length === 0) return compare(first, true);
  return sql`(${compare(first, true)} or (${sql`${tuple(first.columns)} = ${tuple(first.values)}`} and ${past(rest)}))`;
}

/**
 * Rows strictly after `position` (one value per key) in the order of `keys`. Keys of one direction become
 * one row comparison, `(a, id) > (x, y)`, which an index on (a, id) serves. Mixed directions cannot share
 * one row comparison (docs/api.md, "Keyset pagination"): consecutive keys of one direction are grouped and the groups expanded,
 * `a < x or (a = x and (b, id) > (y, z))`, with the non-strict `a <= x` in front so an index on the
 * first key still bounds the scan.
 */
export function afterPosition(collection: Collection, keys: readonly SortKey[], position: readonly KeyValue[]): SQL {
  const groups: Group[] = [];
  keys.forEach((key, at) => {
    const field = collection.fields.get(key.field)!;
    const column = sql`${field.column}`;
    const value = keyLiteral(field.type, position[at]!);
    const last = groups.at(-1);
    if (last && last.descending === key.descending) {
      last.columns.push(column);
      last.values.push(value);
    } else {
      groups.push({ columns: [column], values: [value], descending: key.descending });
    }
  });
  if (groups.length === 1) return past(groups);
  return sql`(${compare(groups[0]!, false)} and ${past(groups)})`;
}

/** The values of every sort key of an item: the position a cursor carries. */
export function positionOf(item: Item, keys: readonly SortKey[]): KeyValue[] {
  return keys.map((key) => item[key.field] as KeyValue);
}

/** The chunk query: filters and position, ordered by the keys, one row more than the page. */
export function keysetQuery(
  database: Database,
  collection: Collection,
  where: readonly (SQL | undefined)[],
  keys: readonly SortKey[],
  pageSize: number,
) {
  return database.drizzle
    .select(collection.selection)
    .from(collection.table)
    .where(and(...where))
    .orderBy(...orderBy(collection, keys))
    .limit(pageSize + 1);
}

export interface KeysetChunk {
  readonly items: Item[];
  /** Whether an item follows the chunk: one row more than the page is fetched to know. */
  readonly more: boolean;
}

export async function fetchKeyset(
  request: ChunkRequest,
  filters: readonly Filter[],
  condition: SQL | undefined,
  keys: readonly SortKey[],
  pageSize: number,
): Promise<KeysetChunk> {
  const { collection, database } = request;
  const rows: Item[] = await keysetQuery(database, collection, [filterCondition(collection, filters), condition], keys, pageSize);
  const more = rows.length > pageSize;
  return { items: more ? rows.slice(0, pageSize) : rows, more };
}

/** `page-size`: the collection's default, or 1 … its max. It may change from one chunk to the next. */
export function parsePageSize(request: QueryRequest): number {
  return parseSize(request.params, 'page-size', request.collection.pageSize);
}

/** The filters as a cursor carries them: the query parameters that express them, in canonical order. */
export function filtersPayload(filters: readonly Filter[]): [string, string][] {
  return filters.map(filterParam);
}

function sameFilter(a: Filter, b: Filter): boolean {
  return a.field === b.field && a.op === b.op && a.values.length === b.values.length && a.values.every((v, i) => v === b.values[i]);
}

/**
 * The filters of a query continued by a cursor: the cursor's. Each filter sent beside it must be one of
 * them (docs/api.md, "Cursors": filters sent beside a cursor must equal the cursor's; absent ones are taken from it).
 */
export function boundFilters(collection: Collection, sent: readonly Filter[], carried: unknown): Filter[] {
  if (!Array.isArray(carried) || !carried.every((p) => Array.isArray(p) && p.length === 2 && p.every((s) => typeof s === 'string'))) {
    throw invalidCursor('malformed');
  }
  let filters: Filter[];
  try {
    filters = parseFilters(collection, new Map(carried as [string, string][]));
  } catch (error) {
    if (error instanceof ApiError) throw invalidCursor('malformed');
    throw error;
  }
  if (filters.length !== carried.length) throw invalidCursor('malformed');
  for (const filter of sent) {
    if (!filters.some((own) => sameFilter(own, filter))) {
      const [name, value] = filterParam(filter);
      throw invalidCursor(`the filter ${name}=${value} is not part of the query the cursor belongs to`);
    }
  }
  return filters;
}

/**
 * Links of keyset chunks carry only page-size and the cursor, which carries the filters and sort: a client
 * that follows them sends no filter beside the cursor, so nothing can disagree with it.
 */
export function cursorLinks(request: ChunkRequest, secret: string, pageSize: number) {
  const bare = linkBuilder(request.collectionUrl, new Map());
  return function link(cursor: CursorPayload | string): string {
    const token = typeof cursor === 'string' ? cursor : encodeCursor(secret, cursor);
    return bare({ 'page-size': pageSize, cursor: token });
  };
}
