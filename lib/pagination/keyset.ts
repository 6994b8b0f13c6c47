// What the keyset variants (cursor, time) share: the "after this position" SQL, the chunk query, bound filters, links.
import { and, type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { ApiError, invalidCursor } from '../http/errors.ts';
import { type CursorPayload, encodeCursor } from './cursor-token.ts';
import { byFilterOrder, type Filter, filterCondition, filterParam, filtersKey, filterValues, parseFilters } from './filters.ts';
import { itemsOf } from './items.ts';
import { linkBuilder } from './links.ts';
import { parseSize, type QueryParams } from './params.ts';
import type { Collection, Field, SortKey } from './registry.ts';
import { collectionKey, literalLimit, shapeOf } from './shapes.ts';
import { runShape } from './shared-reads.ts';
import { orderBy, sortParam } from './sort.ts';
import { operatorOf, type KeyValue as Value } from './values.ts';
import type { ChunkRequest, QueryRequest } from './variants.ts';

/** The query of links that carry none of the request's parameters (cursorLinks). */
const NO_PARAMS: QueryParams = new Map();

/** One value of a position: a number for int2/int4 fields (and a declared collection's ids), text for most others, null where a nullable sort key is NULL. */
export type KeyValue = Value | null;

export type Item = Record<string, unknown>;

/** A value (or its placeholder) as it goes into SQL, cast as the field's type needs (timestamps: text cast to timestamptz). */
function keyLiteral(field: Field, value: Value | Placeholder): SQL {
  return field.value.literal(value);
}

/** Whether a value read back from a cursor has the shape its field needs: NULL only where the field may hold it. */
export function isKeyValue(field: Field, value: unknown): value is KeyValue {
  if (value === null) return field.nullable;
  return field.value.isPosition(value);
}

/**
 * Consecutive sort keys compared together: NOT NULL keys of one direction in one row comparison, which an index
 * on them serves; a key that may be NULL alone, with expanded predicates.
 */
interface Group {
  readonly columns: SQL[];
  readonly values: SQL[];
  readonly descending: boolean;
  /** Set for a key that may hold NULL: whether the position's value of it is NULL. */
  readonly nullable?: { readonly isNull: boolean };
  /** Set for a key of an extension's type (citext), alone in its group: its operators' schema (operatorOf). */
  readonly operators?: Pick<Field['value'], 'operatorSchema'>;
}

function tuple(parts: SQL[]): SQL {
  return parts.length === 1 ? parts[0]! : sql`(${sql.join(parts, sql`, `)})`;
}

function compare(group: Group, strict: boolean): SQL {
  const op = group.descending ? (strict ? '<' : '<=') : strict ? '>' : '>=';
  return sql`${tuple(group.columns)} ${operatorOf(group.operators ?? {}, op)} ${tuple(group.values)}`;
}

/**
 * Rows strictly past the group's position value, in its direction; undefined when none can be. NULLs sort as
 * PostgreSQL puts them by default: last ascending, first descending. So ascending, past x are the greater values
 * and the NULLs, and past NULL nothing; descending, past x are the smaller values, and past NULL every value.
 */
function strictlyPast(group: Group): SQL | undefined {
  if (!group.nullable) return compare(group, true);
  const column = group.columns[0]!;
  if (group.nullable.isNull) return group.descending ? sql`${column} is not null` : undefined;
  return group.descending ? compare(group, true) : sql`(${compare(group, true)} or ${column} is null)`;
}

/** Rows level with the group's position value. */
function level(group: Group): SQL {
  if (group.nullable?.isNull) return sql`${group.columns[0]!} is null`;
  return sql`${tuple(group.columns)} ${operatorOf(group.operators ?? {}, '=')} ${tuple(group.values)}`;
}

/**
 * Of a nullable group split at its NULLs (Region), the rows strictly past its position value within the run of the
 * index the value is in: ascending past x, the greater values (the NULLs after them are the other run); descending
 * past NULL, none (every value is the other run).
 */
function strictlyWithin(group: Group): SQL | undefined {
  return group.nullable?.isNull ? undefined : compare(group, true);
}

// (g0 strictly past) or (g0 level and the rest past), recursively; the last group past, or level too when inclusive.
// `within`: the first group's past ends at its run of the index (strictlyWithin).
function past(groups: readonly Group[], inclusive: boolean, within = false): SQL {
  const [first, ...rest] = groups as [Group, ...Group[]];
  const beyond = within ? strictlyWithin(first) : strictlyPast(first);
  if (rest.length === 0) {
    if (inclusive) return first.nullable ? sql`(${beyond ?? sql`false`} or ${level(first)})` : compare(first, false);
    return beyond ?? sql`false`;
  }
  const then = sql`${level(first)} and ${past(rest, inclusive)}`;
  return beyond === undefined ? sql`(${then})` : sql`(${beyond} or (${then}))`;
}

/**
 * A bound on the first group alone that the rows past the position also meet, in front of the expanded
 * predicate so that an index on the first key bounds the scan: `a >= x` on a NOT NULL key, `a <= x` on a
 * nullable descending one (the NULLs come first, so lie behind). A nullable ascending key has none: past x lie
 * the NULLs too, at the index's other end (docs/reference/api.md, "NULLs").
 */
function leadingBound(group: Group): SQL | undefined {
  if (!group.nullable) return compare(group, false);
  if (group.nullable.isNull) return undefined;
  return group.descending ? compare(group, false) : undefined;
}

/** The placeholder of the position's value of the `at`-th sort key. */
function keySlot(at: number): Placeholder {
  return sql.placeholder(`k${at}`);
}

/**
 * Rows strictly after a position (one value per key, placeholders k0, k1, … that positionValues fills; none for
 * a NULL, whose SQL differs) in the order of `keys`, or at it too when `inclusive`. NOT NULL keys of one direction
 * become one row comparison, `(a, id) > (x, y)`, which an index on (a, id) serves. Mixed directions cannot share
 * one row comparison (docs/reference/api.md, "Keyset pagination"), nor can a key that may be NULL, which `(a, id) > (x, y)`
 * is never true of: consecutive NOT NULL keys of one direction are grouped, a nullable key is a group of its own,
 * and the groups expanded, `a < x or (a = x and (b, id) > (y, z))`, with a non-strict bound on the first group in
 * front so an index on the first key still bounds the scan (leadingBound). With NOT NULL keys only, this is the
 * SQL it always was.
 */
function afterPosition(
  collection: Collection,
  keys: readonly SortKey[],
  nulls: readonly boolean[],
  inclusive: boolean,
  region?: Region,
): SQL {
  const groups: Group[] = [];
  keys.forEach((key, at) => {
    const field = collection.fields.get(key.field)!;
    const column = sql`${field.column}`;
    // A row comparison takes each column's operators by name from the search path: an extension's type is compared alone.
    const operators = field.value.operatorSchema === undefined ? undefined : field.value;
    if (field.nullable) {
      const value = nulls[at] ? sql`null` : keyLiteral(field, keySlot(at));
      groups.push({
        columns: [column],
        values: [value],
        descending: key.descending,
        nullable: { isNull: nulls[at] === true },
        ...(operators ? { operators } : {}),
      });
      return;
    }
    const value = keyLiteral(field, keySlot(at));
    if (operators) {
      groups.push({ columns: [column], values: [value], descending: key.descending, operators });
      return;
    }
    const last = groups.at(-1);
    if (last && !last.nullable && last.operators === undefined && last.descending === key.descending) {
      last.columns.push(column);
      last.values.push(value);
    } else {
      groups.push({ columns: [column], values: [value], descending: key.descending });
    }
  });
  const first = groups[0]!;
  if (region === 'beyond') return first.descending ? sql`${first.columns[0]!} is not null` : sql`${first.columns[0]!} is null`;
  if (region === 'position') {
    // The run's own bound: `a >= x` ascending, `a is null` descending (an index condition either way).
    const bound = first.nullable?.isNull ? level(first) : compare(first, false);
    return sql`(${bound} and ${past(groups, inclusive, true)})`;
  }
  if (groups.length === 1) return past(groups, inclusive);
  const bound = leadingBound(first);
  return bound === undefined ? past(groups, inclusive) : sql`(${bound} and ${past(groups, inclusive)})`;
}

/**
 * Past a position whose first key may be NULL, the rows lie in two runs of the index on it when the position is in
 * the run before the other: ascending, past a value x lie the greater values, then the NULLs at the index's other
 * end; descending, past NULL (the NULLs come first) lie the rest of the NULLs, then every value. One predicate over
 * both (`a > x or a is null`) bounds no index scan, so a walk deep into such a collection would read every row
 * before its position for each chunk. The chunk reads the position's run instead (`position`, bounded by the
 * index), and only when that run ends within the chunk, the other from its start (`beyond`).
 */
export type Region = 'position' | 'beyond';

/** Whether the rows past `start` lie in two runs of the index (Region). */
function splitAtNulls(collection: Collection, keys: readonly SortKey[], start: KeysetStart | undefined): boolean {
  if (start === undefined || !('after' in start) || !collection.fields.get(keys[0]!.field)!.nullable) return false;
  return keys[0]!.descending === (start.after[0] === null);
}

/** The values of a position, for afterPosition's placeholders (a NULL has none). */
function positionValues(position: readonly KeyValue[], into: Record<string, unknown>): void {
  position.forEach((value, at) => {
    if (value !== null) into[`k${at}`] = value;
  });
}

/**
 * The values of every sort key of an item: the position a cursor carries, each as its field's value type
 * carries it (lib/pagination/values.ts: an exact number as its text). Without a collection, the items' values.
 */
export function positionOf(item: Item, keys: readonly SortKey[], collection?: Collection): KeyValue[] {
  return keys.map((key) => {
    const value = item[key.field];
    if (value === null || value === undefined) return null;
    const position = collection ? collection.fields.get(key.field)!.value.position : undefined;
    return position ? position(value) : (value as Value);
  });
}

/**
 * Where a keyset chunk starts: after a position (one value per sort key; at it too when `inclusive`), or past a
 * bound on the first key alone (the time variant's `before` and `after`, which sit between items).
 */
export type KeysetStart =
  | { readonly after: readonly KeyValue[]; readonly inclusive?: boolean }
  | { readonly bound: '<' | '<=' | '>' | '>='; readonly value: Value };

/** What a start makes of the query's shape: none, a position (which of its values are NULL, whether inclusive), or a bound and its operator. */
function startKey(start: KeysetStart | undefined, region?: Region): string {
  if (start === undefined) return '';
  if (!('after' in start)) return start.bound;
  const nulls = start.after.some((value) => value === null) ? start.after.map((value) => (value === null ? '0' : '1')).join('') : '';
  return `a${start.inclusive ? '=' : ''}${nulls}${region === undefined ? '' : `|${region}`}`;
}

function startCondition(
  collection: Collection,
  keys: readonly SortKey[],
  start: KeysetStart | undefined,
  region?: Region,
): SQL | undefined {
  if (start === undefined) return undefined;
  if ('after' in start) {
    const nulls = start.after.map((value) => value === null);
    return afterPosition(collection, keys, nulls, start.inclusive === true, region);
  }
  const field = collection.fields.get(keys[0]!.field)!;
  return sql`${field.column} ${sql.raw(start.bound)} ${keyLiteral(field, keySlot(0))}`;
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
  region?: Region,
) {
  return database.drizzle
    .select(collection.selection)
    .from(collection.table)
    .where(and(filterCondition(collection, filters), startCondition(collection, keys, start, region)))
    .orderBy(...orderBy(collection, keys))
    .limit(literalLimit(pageSize + 1));
}

/** The values of keysetQuery's placeholders (the `beyond` region has none of the position's). */
export function keysetValues(
  collection: Collection,
  filters: readonly Filter[],
  start: KeysetStart | undefined,
  region?: Region,
): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  filterValues(collection, filters, values);
  if (start !== undefined && region !== 'beyond') {
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
  const { collection, database, budget } = request;
  const read = (region?: Region) => {
    const key = `${collectionKey(collection)}|k|${filtersKey(filters)}|${sortParam(keys)}|${startKey(start, region)}|${pageSize}`;
    const shape = shapeOf(database, key, () => keysetQuery(database, collection, filters, keys, start, pageSize, region));
    return runShape(database, shape, keysetValues(collection, filters, start, region), budget);
  };
  let rows: unknown[][];
  if (splitAtNulls(collection, keys, start)) {
    rows = await read('position');
    // The position's run ended within the chunk: the chunk goes on with the other run.
    if (rows.length <= pageSize) rows = [...rows, ...(await read('beyond'))].slice(0, pageSize + 1);
  } else {
    rows = await read();
  }
  return { items: itemsOf(collection, rows, pageSize), more: rows.length > pageSize };
}

/** `page-size`: the collection's default, or 1 … its max. It may change from one chunk to the next. */
export function parsePageSize(request: QueryRequest): number {
  return parseSize(request.params, 'page-size', request.collection.pageSize);
}

/** What a cursor's filters carry in place of its row rules' filters: the digest of the client's rows. */
const ROWS = '@rows';

/**
 * The filters as a cursor carries them: the query parameters that express them, in canonical order; and, for a
 * collection with row rules, the digest of the rows they select (lib/pagination/access.ts), never their values.
 */
export function filtersPayload(filters: readonly Filter[]): [string, string][] {
  const payload: [string, string][] = [];
  let rows: string | undefined;
  for (const filter of filters) {
    if (filter.rows === undefined) payload.push(filterParam(filter));
    else rows = filter.rows;
  }
  if (rows !== undefined) payload.push([ROWS, rows]);
  return payload;
}

function sameFilter(a: Filter, b: Filter): boolean {
  return a.field === b.field && a.op === b.op && a.values.length === b.values.length && a.values.every((v, i) => v === b.values[i]);
}

/**
 * The filters of a query continued by a cursor: the cursor's. Each filter sent beside it must be one of
 * them (docs/reference/api.md, "Cursors": filters sent beside a cursor must equal the cursor's; absent ones are taken from it).
 * A cursor issued for other rows than the client's (another tenant's) is a 400: its row rules' digest differs.
 */
export function boundFilters(collection: Collection, sent: readonly Filter[], carried: unknown): Filter[] {
  if (!Array.isArray(carried) || !carried.every((p) => Array.isArray(p) && p.length === 2 && p.every((s) => typeof s === 'string'))) {
    throw invalidCursor('malformed');
  }
  const pairs = carried as [string, string][];
  const rules = sent.filter((filter) => filter.rows !== undefined);
  const carriedRows = pairs.find(([name]) => name === ROWS)?.[1];
  // A collection with row rules is read twice: before its client is known, to price the request, and then for
  // the client's rows (Preparer.bind), which alone is served; only that reading can check whose rows these are.
  const bound = rules.length > 0 || collection.access.rows.length === 0;
  if (bound && carriedRows !== rules[0]?.rows) throw invalidCursor("it was issued for other rows than this client's");
  const own = carriedRows === undefined ? pairs : pairs.filter(([name]) => name !== ROWS);
  let filters: Filter[];
  try {
    filters = parseFilters(collection, new Map(own));
  } catch (error) {
    if (error instanceof ApiError) throw invalidCursor('malformed');
    throw error;
  }
  if (filters.length !== own.length) throw invalidCursor('malformed');
  for (const filter of sent) {
    if (filter.rows === undefined && !filters.some((mine) => sameFilter(mine, filter))) {
      const [name, value] = filterParam(filter);
      throw invalidCursor(`the filter ${name}=${value} is not part of the query the cursor belongs to`);
    }
  }
  return rules.length === 0 ? filters : [...filters, ...rules].sort(byFilterOrder);
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
