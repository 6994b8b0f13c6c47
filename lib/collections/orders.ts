// Orders and the indexes that serve them: a btree index whose leading columns are the sort keys, then the key.
import type { Index, Relation } from '../catalog/model.ts';

export interface OrderKey {
  readonly column: string;
  readonly descending: boolean;
}

/** The order with the key's columns not already in it appended, in the direction of the last key (ascending when none). */
export function withKey(order: readonly OrderKey[], key: readonly string[]): OrderKey[] {
  const descending = order.at(-1)?.descending ?? false;
  const missing = key.filter((column) => !order.some((entry) => entry.column === column));
  return [...order, ...missing.map((column) => ({ column, descending }))];
}

/**
 * A usable btree index that hands out rows in `order` (the key appended), scanned forward or backward, or
 * undefined. NULLs go where PostgreSQL puts them by default (last ascending, first descending), so on a
 * nullable column an index must put them there too.
 */
export function servingIndex(relation: Relation, order: readonly OrderKey[]): Index | undefined {
  return relation.indexes.find((index) => serves(relation, index, order));
}

function serves(relation: Relation, index: Index, order: readonly OrderKey[]): boolean {
  if (!index.usable || index.columns.length < order.length || order.length === 0) return false;
  const backward = index.columns[0]!.descending !== order[0]!.descending;
  return order.every((entry, at) => {
    const indexed = index.columns[at]!;
    if (indexed.column !== entry.column || (indexed.descending !== entry.descending) !== backward) return false;
    const nullable = relation.columns.find((column) => column.name === entry.column)?.nullable ?? true;
    return !nullable || (backward ? !indexed.nullsFirst : indexed.nullsFirst) === entry.descending;
  });
}
