// Time-based pagination (docs/reference/api.md, "Keyset pagination"): `before` moves to older items, `after` to newer ones, by timestamp and id.
import { invalidCursor } from '../http/errors.ts';
import type { CursorPayload } from './cursor-token.ts';
import type { Filter } from './filters.ts';
import {
  boundFilters,
  cursorLinks,
  fetchKeyset,
  filtersPayload,
  type Item,
  isKeyValue,
  type KeysetStart,
  type KeyValue,
  parsePageSize,
  positionOf,
} from './keyset.ts';
import type { Links } from './links.ts';
import type { Collection, SortKey } from './registry.ts';
import { type ChunkRequest, defineVariant, type QueryRequest, type Reading } from './variants.ts';

/** older: newest first, towards older items; newer: oldest first, towards newer items. */
type Direction = 'older' | 'newer';

/**
 * A position between items: a timestamp and the key's values of the item there (`i` an array), with `inclusive`
 * when the position takes in its own item (reversed), or "-" / "+" for a position before / after every item of that
 * timestamp (what `before` and `after` mean). The demo's cursors of an earlier release carry its integer id as a
 * number (`id ± 1` steps over an item).
 */
interface Position {
  readonly t: KeyValue;
  readonly i: number | '-' | '+' | readonly KeyValue[];
  readonly inclusive?: boolean;
}

interface TimeQuery {
  readonly direction: Direction;
  /** Exclusive; null: from the end the direction starts at (the newest for older, the oldest for newer). */
  readonly position: Position | null;
  readonly filters: readonly Filter[];
}

type TimePlan = TimeQuery & Reading;

function timeField(collection: Collection): string {
  return collection.timeField!;
}

function keysOf(collection: Collection, direction: Direction): SortKey[] {
  const descending = direction === 'older';
  return [{ field: timeField(collection), descending }, ...collection.key.map((field) => ({ field, descending }))];
}

/** Items strictly past the position in the direction. */
function startOf(query: TimeQuery): KeysetStart | undefined {
  const { direction, position } = query;
  if (position === null) return undefined;
  if (typeof position.i === 'number') return { after: [position.t, position.i] };
  if (Array.isArray(position.i)) return { after: [position.t, ...position.i], inclusive: position.inclusive === true };
  // "-" sits before the timestamp's items, "+" after them: older than "+" includes them, newer than "-" too.
  const inclusive = direction === 'older' ? position.i === '+' : position.i === '-';
  const bound = direction === 'older' ? (inclusive ? '<=' : '<') : inclusive ? '>=' : '>';
  return { bound, value: position.t as string };
}

/**
 * The same position seen from the other direction, keeping the item at it: the prev link of an empty chunk
 * must not skip the item its position names. Ids are integers, so "up to and including id n" is "before n + 1";
 * any other key's position is made inclusive.
 */
function reversed(position: Position, from: Direction): Position {
  if (Array.isArray(position.i)) return { ...position, inclusive: !position.inclusive };
  if (typeof position.i !== 'number') return position;
  return { t: position.t, i: from === 'older' ? position.i - 1 : position.i + 1 };
}

function positionOfItem(collection: Collection, item: Item): Position {
  const [t, ...i] = positionOf(item, keysOf(collection, 'newer'), collection);
  return { t: t!, i };
}

function payloadOf(collection: Collection, query: TimeQuery, direction: Direction, position: Position | null): CursorPayload {
  const p = position && (position.inclusive ? [position.t, position.i, 1] : [position.t, position.i]);
  return { v: 'time', c: collection.name, d: direction, p, f: filtersPayload(query.filters) };
}

/** Whether `i` of a cursor's position is one the collection's positions carry. */
function isPositionKey(collection: Collection, i: unknown): boolean {
  if (i === '-' || i === '+') return true;
  // One integer id as a number: the demo's positions, which its cursors carried so before it was served from its
  // file (its id an int8 since), taken as they were (startOf, reversed).
  if (Number.isSafeInteger(i)) {
    return collection.key.length === 1 && isKeyValue(collection.fields.get(collection.key[0]!)!, i);
  }
  return (
    Array.isArray(i) &&
    i.length === collection.key.length &&
    collection.key.every((field, at) => isKeyValue(collection.fields.get(field)!, i[at]) && i[at] !== null)
  );
}

function fromCursor(request: QueryRequest, cursor: CursorPayload): TimeQuery {
  const { collection } = request;
  const { d, p } = cursor;
  if (d !== 'older' && d !== 'newer') throw invalidCursor('malformed');
  let position: Position | null = null;
  if (p !== null) {
    if (!Array.isArray(p) || !(p.length === 2 || (p.length === 3 && p[2] === 1 && Array.isArray(p[1])))) throw invalidCursor('malformed');
    const [t, i] = p as unknown[];
    const time = collection.fields.get(timeField(collection))!;
    // A bound ("-", "+") sits at a timestamp; a NULL one only at an item of a nullable time field (a view's).
    if (!isKeyValue(time, t) || (t === null && !Array.isArray(i)) || !isPositionKey(collection, i)) throw invalidCursor('malformed');
    position = { t: t as KeyValue, i: i as Position['i'], ...(p.length === 3 ? { inclusive: true } : {}) };
  }
  return { direction: d, position, filters: boundFilters(collection, request.filters, cursor.f) };
}

function queryOf(request: QueryRequest): TimeQuery {
  const { params, cursor, filters, collection } = request;
  if (cursor) return fromCursor(request, cursor);
  // The time field's own reading: RFC 3339 for timestamptz, a timestamp without time zone for one.
  const parse = collection.fields.get(timeField(collection))!.value.parse;
  const before = params.get('before');
  if (before !== undefined) return { direction: 'older', position: { t: parse('before', before), i: '-' }, filters };
  const after = params.get('after');
  if (after !== undefined) return { direction: 'newer', position: { t: parse('after', after), i: '+' }, filters };
  // No before or after: the newest items first; next moves to older ones (docs/reference/api.md, "Parameters").
  return { direction: 'older', position: null, filters };
}

/** self, next, prev, and for a chunk that reached the newest items, poll instead of next. */
function linksOf(request: ChunkRequest, query: TimeQuery, chunk: { items: Item[]; more: boolean }, pageSize: number): Links {
  const { collection, params } = request;
  const link = cursorLinks(request, request.cursorSecret, pageSize);
  const to = (direction: Direction, position: Position | null) => link(payloadOf(collection, query, direction, position));
  const first = chunk.items[0] && positionOfItem(collection, chunk.items[0]);
  const last = chunk.items.at(-1) && positionOfItem(collection, chunk.items.at(-1)!);
  const marker = ['before', 'after'].find((name) => params.has(name));
  const self = request.cursor
    ? link(params.get('cursor')!)
    : request.href(marker ? { 'page-size': pageSize, [marker]: params.get(marker)! } : { 'page-size': pageSize });
  const { direction, position } = query;
  if (direction === 'older') {
    // prev moves to newer items: past the first item, or from this chunk's position when it is empty.
    const prev = first ?? (position && reversed(position, 'older'));
    return {
      self,
      next: chunk.more && last ? to('older', last) : undefined,
      prev: to('newer', prev ?? null),
    };
  }
  const back = first ?? (position && reversed(position, 'newer'));
  return {
    self,
    next: chunk.more && last ? to('newer', last) : undefined,
    // Reached the newest: a link to where new items will appear; an empty chunk keeps its position.
    poll: chunk.more ? undefined : to('newer', last ?? position),
    // Nothing lies before the oldest item of all.
    prev: back ? to('older', back) : undefined,
  };
}

export const timeVariant = defineVariant<TimePlan>({
  name: 'time',
  read(request) {
    const query = queryOf(request);
    return { ...query, pageSize: parsePageSize(request), count: 'none', offset: 0, firstKey: timeField(request.collection) };
  },
  async serve(request, query) {
    const { collection } = request;
    const { pageSize } = query;
    const keys = keysOf(collection, query.direction);
    const chunk = await fetchKeyset(request, query.filters, startOf(query), keys, pageSize);
    return { fields: { pageSize }, items: chunk.items, links: linksOf(request, query, chunk, pageSize) };
  },
});
