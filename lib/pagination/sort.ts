// The `sort` parameter: a comma list of sort keys, always ending with the unique `id` tie-breaker.
import { asc, desc, type SQL } from 'drizzle-orm';
import { invalidParameter } from '../http/errors.ts';
import type { QueryParams } from './params.ts';
import type { Collection, SortKey } from './registry.ts';

/** Appends `id` in the direction of the key before it, unless `id` is already a key. */
export function withTieBreaker(keys: readonly SortKey[]): SortKey[] {
  const idAt = keys.findIndex((key) => key.field === 'id');
  if (idAt !== -1) return keys.slice(0, idAt + 1);
  return [...keys, { field: 'id', descending: keys.at(-1)?.descending ?? false }];
}

/** The request's sort (or the collection's default), with the tie-breaker. */
export function parseSort(collection: Collection, params: QueryParams): SortKey[] {
  const text = params.get('sort');
  if (text === undefined) return withTieBreaker(collection.defaultSort);
  const keys: SortKey[] = [];
  const offered = collection.sortKeys.join(', ');
  for (const part of text.split(',')) {
    const descending = part.startsWith('-');
    const field = descending ? part.slice(1) : part;
    if (!collection.sortKeys.includes(field)) {
      const reason = offered ? `must be a comma list of ${offered}, each optionally prefixed with -` : 'is not offered by this collection';
      throw invalidParameter('sort', reason);
    }
    if (keys.some((key) => key.field === field)) throw invalidParameter('sort', `names ${field} twice`);
    keys.push({ field, descending });
  }
  return withTieBreaker(keys);
}

/** "name,-priceCents,id": the sort as it goes into links. */
export function sortParam(keys: readonly SortKey[]): string {
  return keys.map((key) => (key.descending ? `-${key.field}` : key.field)).join(',');
}

export function orderBy(collection: Collection, keys: readonly SortKey[]): SQL[] {
  return keys.map((key) => {
    const column = collection.fields.get(key.field)!.column;
    return key.descending ? desc(column) : asc(column);
  });
}
