// The `sort` parameter: a comma list of sort keys, always ending with the collection's unique key (`id`) as the tie-breaker.
import { asc, desc, type SQL } from 'drizzle-orm';
import { invalidParameter } from '../http/errors.ts';
import type { QueryParams } from './params.ts';
import type { Collection, SortKey } from './registry.ts';

/**
 * Ends an order with the collection's key (`id` by default): keys after the last of the key's fields are dropped,
 * since the key decides already, and its fields not in the order are appended in the direction of the key before them.
 */
export function withTieBreaker(keys: readonly SortKey[], key: readonly string[] = ['id']): SortKey[] {
  const missing = new Set(key);
  const order: SortKey[] = [];
  for (const sortKey of keys) {
    order.push(sortKey);
    missing.delete(sortKey.field);
    if (missing.size === 0) return order;
  }
  const descending = order.at(-1)?.descending ?? false;
  for (const field of key) if (missing.has(field)) order.push({ field, descending });
  return order;
}

/** The request's sort (or the collection's default), with the tie-breaker. */
export function parseSort(collection: Collection, params: QueryParams): SortKey[] {
  const text = params.get('sort');
  if (text === undefined) return withTieBreaker(collection.defaultSort, collection.key);
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
  return withTieBreaker(keys, collection.key);
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
