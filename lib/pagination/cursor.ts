// Cursor-based pagination (docs/reference/api.md, "Keyset pagination"): `page-size` and an opaque, signed `cursor`; `since_id` starts one.

import { conflictingParameters, invalidCursor, invalidParameter } from '../http/errors.ts';
import type { CursorPayload } from './cursor-token.ts';
import type { Filter } from './filters.ts';
import {
  boundFilters,
  cursorLinks,
  fetchKeyset,
  filtersPayload,
  type Item,
  isKeyValue,
  type KeyValue,
  parsePageSize,
  positionOf,
} from './keyset.ts';
import type { Links } from './links.ts';
import { type Collection, type Field, type SortKey, splitSort } from './registry.ts';
import { sortParam, withTieBreaker } from './sort.ts';
import { integerText } from './values.ts';
import { defineVariant, type QueryRequest, type Reading } from './variants.ts';

/** A query of the cursor variant: its order, its filters, and the position it continues after. */
interface CursorQuery {
  readonly keys: readonly SortKey[];
  readonly filters: readonly Filter[];
  /** The values of every sort key of the last item seen; absent on the first chunk. */
  readonly position: readonly KeyValue[] | undefined;
  /** Set when the chunk was asked for with since_id, for its self link. */
  readonly sinceId?: string | number;
}

type CursorPlan = CursorQuery & Reading;

/**
 * The payload of this variant's cursors: `s` the sort (ending with the key, `id`), `f` the filters as query
 * parameters, `k` the position. The sort and filters bind the cursor to its query (docs/reference/api.md, "Cursors").
 */
function payloadOf(collection: Collection, query: CursorQuery, item: Item): CursorPayload {
  return {
    v: 'cursor',
    c: collection.name,
    s: sortParam(query.keys),
    f: filtersPayload(query.filters),
    k: positionOf(item, query.keys, collection),
  };
}

function sortOf(collection: Collection, text: unknown): SortKey[] {
  if (typeof text !== 'string') throw invalidCursor('malformed');
  const keys = splitSort(text);
  const fields = keys.map((key) => key.field);
  // A request may sort by the sort keys only, but the default order may name other columns (an order no index
  // serves, which the file accepts): its cursors carry it whole.
  const isDefault = text === sortParam(withTieBreaker(collection.defaultSort, collection.key));
  const known = isDefault || fields.every((field) => collection.key.includes(field) || collection.sortKeys.includes(field));
  // A sort as the service writes them: ending with the key, each field once.
  const complete = sortParam(withTieBreaker(keys, collection.key)) === text;
  if (!known || !complete || new Set(fields).size !== fields.length) throw invalidCursor('malformed');
  return keys;
}

/** The field since_id reads: the key, when it is one integer field; undefined otherwise. */
export function sinceIdField(collection: Collection): Field | undefined {
  if (collection.key.length !== 1) return undefined;
  const field = collection.fields.get(collection.key[0]!)!;
  return field.value.integer ? field : undefined;
}

/** since_id's value: from 0 up to the key type's largest, as the key's position carries it. */
function parseSinceId(collection: Collection, text: string): string | number {
  const field = sinceIdField(collection);
  if (field === undefined) {
    throw invalidParameter('since_id', `is not offered by ${collection.name}, whose key is not one integer field`);
  }
  // The key type's own reading, then its range from 0: one wording for both ("must be an integer from 0 to …").
  const value = integerText('since_id', text, 0n, field.value.integer!.max);
  return field.value.bind(value) as string | number;
}

function fromCursor(request: QueryRequest, cursor: CursorPayload): CursorQuery {
  const { collection, params } = request;
  const keys = sortOf(collection, cursor.s);
  // A sort sent beside a cursor must be the cursor's; an absent one is taken from it.
  if (params.has('sort') && sortParam(request.sort) !== sortParam(keys)) {
    throw invalidCursor(`sort=${params.get('sort')} is not the sort of the query the cursor belongs to (${sortParam(keys)})`);
  }
  const position = cursor.k;
  if (
    !Array.isArray(position) ||
    position.length !== keys.length ||
    !keys.every((key, at) => isKeyValue(collection.fields.get(key.field)!, position[at]))
  ) {
    throw invalidCursor('malformed');
  }
  return { keys, filters: boundFilters(collection, request.filters, cursor.f), position: position as KeyValue[] };
}

function queryOf(request: QueryRequest): CursorQuery {
  const { params, cursor } = request;
  if (cursor) return fromCursor(request, cursor);
  const since = params.get('since_id');
  if (since !== undefined) {
    if (params.has('sort')) {
      throw conflictingParameters(['since_id', 'sort'], 'cannot be combined; since_id returns items in ascending id order');
    }
    // since_id: the items with a greater id, ascending by id (docs/reference/api.md, "Keyset pagination").
    const sinceId = parseSinceId(request.collection, since);
    return { keys: [{ field: request.collection.key[0]!, descending: false }], filters: request.filters, position: [sinceId], sinceId };
  }
  return { keys: request.sort, filters: request.filters, position: undefined };
}

export const cursorVariant = defineVariant<CursorPlan>({
  name: 'cursor',
  read(request) {
    const query = queryOf(request);
    return { ...query, pageSize: parsePageSize(request), count: 'none', offset: 0, firstKey: query.keys[0]!.field };
  },
  async serve(request, query) {
    const { collection, params } = request;
    const { pageSize } = query;
    const start = query.position && { after: query.position };
    const { items, more } = await fetchKeyset(request, query.filters, start, query.keys, pageSize);
    const link = cursorLinks(request, request.cursorSecret, pageSize);
    const first: Record<string, string | number> = { 'page-size': pageSize };
    if (query.sinceId !== undefined) first.since_id = query.sinceId;
    const last = items.at(-1);
    const links: Links = {
      self: request.cursor ? link(params.get('cursor')!) : request.href(first),
      // Absent on the last chunk and on an empty one (fetched one row more than the page to know).
      next: more && last ? link(payloadOf(collection, query, last)) : undefined,
    };
    return { fields: { pageSize }, items, links };
  },
});
