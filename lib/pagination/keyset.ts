// What the keyset variants (cursor, time) share: the "after this position" SQL, the chunk query, bound filters, links.
import { and, type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { ApiError, invalidCursor } from '../http/errors.ts';
import { type CursorPayload, encodeCursor } from './cursor-token.ts';
import { type Filter, filterCondition, filterParam, filtersKey, filterValues, parseFilters } from './filters.ts';
import { linkBuilder } from './links.ts';
import { parseSize, type QueryParams } from './params.ts';
import type { Collection, FieldType, SortKey } from './registry.ts';
import { collectionKey, itemsOf, literalLimit, runShape, shapeOf } from './shapes.ts';
import { orderBy, sortParam } from './sort.ts';
import { isTimestampText, timestampValue } from './timestamps.ts';
import type { ChunkRequest, QueryRequest } from './variants.ts';

/** The query of links that carry none of the request's parameters (cursorLinks). */
const NO_PARAMS: QueryParams = new Map();

/** One value of a position: a number for integer fields, text for text and timestamp fields. */
export type KeyValue = string | number;

export type Item = Record<string, unknown>;

/** A value (or its placeholder) as it goes into SQL: timestamps as text cast to timestamptz. */
export function keyLiteral(type: FieldType, value: KeyValue | Placeholder): SQL {
  return type === 'timestamp' ? timestampValue(value as string | Placeholder) : sql`${value}`;
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

/** The placeholder of the position's value of the `at`-th sort key. */
function keySlot(at: number): Placeholder {
  return sql.placeholder(`k${at}`);
}

/**
 * Rows strictly after a position (one value per key, placeholders k0, k1, … that positionValues fills) in the
 * order of `keys`. Keys of one direction become
 * one row comparison, `(a, id) > (x, y)`, which an index on (a, id) serves. Mixed directions cannot share
 * one row comparison (docs/api.md, "Keyset pagination"): consecutive keys of one direction are grouped and the groups expanded,
 * `a < x or (a = x and (b, id) > (y, z))`, with the non-strict `a <= x` in front so an index on the
 * first key still bounds the scan.
 */
function afterPosition(collection: Collection, keys: readonly SortKey[]): SQL {
  const groups: Group[] = [];
  keys.forEach((key, at) => {
    const field = collection.fields.get(key.field)!;
    const column = sql`${field.column}`;
    const value = keyLiteral(field.type, keySlot(at));
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

/** The values of a position, for afterPosition's placeholders. */
function positionValues(position: readonly KeyValue[], into: Record<string, unknown>): void {
  position.forEach((value, at) => {
    into[`k${at}`] = value;
  });
}

/** The values of every sort key of an item: the position a cursor carries. */
export function positionOf(item: Item, keys: readonly SortKey[]): KeyValue[] {
  return keys.map((key) => item[key.field] as KeyValue);
}

/**
 * Where a keyset chunk starts: strictly after a position (one value per sort key), or past a bound on the
 * first key alone (the time variant's `before` and `after`, which sit between items).
 */
export type KeysetStart = { readonly after: readonly KeyValue[] } | { readonly bound: '<' | '<=' | '>' | '>='; readonly value: KeyValue };

/** What a start makes of the query's shape: none, a position, or a bound and its operator. */
function startKey(start: KeysetStart | undefined): string {
  return start === undefined ? '' : 'after' in start ? 'a' : start.bound;
}

function startCondition(collection: Collection, keys: readonly SortKey[], start: KeysetStart | undefined): SQL | undefined {
  if (start === undefined) return undefined;
  if ('after' in start) return afterPosition(collection, keys);
  const field = collection.fields.get(keys[0]!.field)!;
  return sql`${field.column} ${sql.raw(start.bound)} ${keyLiteral(field.type, keySlot(0))}`;
}

/**
 * The chunk query of a shape: the filters (placeholders f0, f1, …) and the start (k0, k1, …), ordered by
 * the keys, one row more than the page (a literal: with a LIMIT parameter PostgreSQL prices a generic plan
 * for a tenth of the table and plans every call anew).
 */
export function keysetQuery(
  database: Database,
  collection: Collection,
  filters: readonly Filter[],
  keys: readonly SortKey[],
  start: KeysetStart | undefined,
  pageSize: number,
) {
  return database.drizzle
    .select(collection.selection)
    .from(collection.table)
    .where(and(filterCondition(collection, filters), startCondition(collection, keys, start)))
    .orderBy(...orderBy(collection, keys))
    .limit(literalLimit(pageSize + 1));
}

/** The values of keysetQuery's placeholders. */
export function keysetValues(collection: Collection, filters: readonly Filter[], start: KeysetStart | undefined): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  filterValues(collection, filters, values);
  if (start !== undefined) {
    if ('after' in start) positionValues(start.after, values);
    else values.k0 = start.value;
  }
  return values;
}

export interface KeysetChunk {
  readonly items: Item[];
  /** Whether an item follows the chunk: one row more than the page is fetched to know. */
  readonly more: boolean;
}

export async function fetchKeyset(
  request: ChunkRequest,
  filters: readonly Filter[],
  start: KeysetStart | undefined,
  keys: readonly SortKey[],
  pageSize: number,
): Promise<KeysetChunk> {
  const { collection, database } = request;
  const key = `${collectionKey(collection)}|k|${filtersKey(filters)}|${sortParam(keys)}|${startKey(start)}|${pageSize}`;
  const shape = shapeOf(database, key, () => keysetQuery(database, collection, filters, keys, start, pageSize));
  const rows = await runShape(database, shape, keysetValues(collection, filters, start));
  return { items: itemsOf(collection, rows, pageSize), more: rows.length > pageSize };
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
  const bare = linkBuilder(request.collectionUrl, NO_PARAMS);
  // Anonymous, like linkBuilder's: made for every chunk.
  return (cursor: CursorPayload | string): string => {
    const token = typeof cursor === 'string' ? cursor : encodeCursor(secret, cursor);
    return bare({ 'page-size': pageSize, cursor: token });
  };
}
