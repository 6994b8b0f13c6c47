// The row reader: rows of a collection's shape, arrays in the order of its fields, to items, each value as its
// field's type prints it; rows that joined reads share (lib/pagination/shared-reads.ts) are read once.
import type { Collection } from './registry.ts';
import { readByMany } from './shared-reads.ts';

type Item = Record<string, unknown>;

/** A row of a collection's items, as arrays in the order of its fields, to an item. */
type ItemReader = (row: readonly unknown[]) => Item;

const readers = new WeakMap<Collection, ItemReader>();

const itemLists = new WeakMap<readonly unknown[][], Item[]>();

/** The item lists made of rows that several requests shared (sharedItems). */
const shared = new WeakSet<readonly Item[]>();

/**
 * The first `count` rows (from runShape, selecting the collection's fields in order) as items. Rows that
 * joined reads share are read once: their items are shared too, and must not be changed.
 */
export function itemsOf(collection: Collection, rows: readonly unknown[][], count: number): Item[] {
  const length = Math.min(rows.length, count);
  const many = readByMany(rows);
  if (many) {
    const cached = itemLists.get(rows);
    if (cached !== undefined && cached.length === length) return cached;
  }
  const read = itemReader(collection);
  const items: Item[] = [];
  for (let at = 0; at < length; at++) items.push(read(rows[at]!));
  if (many) {
    itemLists.set(rows, items);
    shared.add(items);
  }
  return items;
}

/** Whether `items` serve several requests (rows a read shared): what is made of them once may serve each. */
export function sharedItems(items: readonly unknown[]): boolean {
  return shared.has(items as readonly Item[]);
}

/**
 * Reads rows that select the collection's fields in order: each value its field's type prints (lib/pagination/values.ts:
 * timestamps from the epoch seconds timestampSelection selects, exact numbers from PostgreSQL's text), others as they come.
 */
function itemReader(collection: Collection): ItemReader {
  let reader = readers.get(collection);
  if (reader !== undefined) return reader;
  const fields = [...collection.fields.values()];
  const names = fields.map((field) => field.name);
  const printers = fields.map((field) => field.value.print);
  reader = (row) => {
    const item: Item = {};
    for (let at = 0; at < names.length; at++) {
      const value = row[at];
      const print = printers[at];
      item[names[at]!] = print !== undefined && value !== null ? print(value) : value;
    }
    return item;
  };
  readers.set(collection, reader);
  return reader;
}
