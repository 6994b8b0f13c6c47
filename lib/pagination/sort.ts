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

/** The sorts of a collection read lately, by their text (undefined: the default): a client sends the same sort with every chunk. */
const sortsRead = new WeakMap<Collection, Map<string | undefined, readonly SortKey[]>>();
const SORTS_KEPT = 64;

/** The request's sort (or the collection's default), with the tie-breaker; frozen, since it is shared with the next request that sends the same. */
export function parseSort(collection: Collection, params: QueryParams): readonly SortKey[] {
  const text = params.get('sort');
  let read = sortsRead.get(collection);
  if (read === undefined) {
    read = new Map();
    sortsRead.set(collection, read);
  }
  let keys = read.get(text);
  if (keys === undefined) {
    keys = Object.freeze(text === undefined ? withTieBreaker(collection.defaultSort, collection.key) : sortOf(collection, text));
    if (read.size >= SORTS_KEPT) read.clear();
    read.set(text, keys);
  }
  return keys;
}

function sortOf(collection: Collection, text: string): SortKey[] {
  const keys: SortKey[] = [];
  for (const part of text.split(',')) {
    const descending = part.startsWith('-');
    const field = descending ? part.slice(1) : part;
    if (!collection.sortKeys.includes(field)) {
      const offered = collection.sortKeys.join(', ');
      const reason = offered ? `must be a comma list of ${offered}, each optionally prefixed with -` : 'is not offered by this collection';
      throw invalidParameter('sort', reason);
    }
    if (keys.some((key) => key.field === field)) throw invalidParameter('sort', `names ${field} twice`);
    keys.push({ field, descending });
  }
  return withTieBreaker(keys, collection.key);
}

/** The texts of sorts written lately: a sort read by parseSort is one array for every request that sends it. */
const sortTexts = new WeakMap<readonly SortKey[], string>();

/** "name,-priceCents,id": the sort as it goes into links. */
export function sortParam(keys: readonly SortKey[]): string {
  let text = sortTexts.get(keys);
  if (text === undefined) {
    text = keys.map((key) => (key.descending ? `-${key.field}` : key.field)).join(',');
    if (Object.isFrozen(keys)) sortTexts.set(keys, text);
  }
  return text;
}

export function orderBy(collection: Collection, keys: readonly SortKey[]): SQL[] {
  return keys.map((key) => {
    const column = collection.fields.get(key.field)!.column;
    return key.descending ? desc(column) : asc(column);
  });
}
