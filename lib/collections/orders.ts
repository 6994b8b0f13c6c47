// Orders and the indexes that serve them: a btree index whose leading columns are the sort keys, then the key
// (after a row rule's columns, which each chunk holds equal to one value), and the index to create when none does.
import type { Index, QualifiedName, Relation } from '../catalog/model.ts';
import { sqlIdentifier } from './names.ts';

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
 * nullable column an index must put them there too. With `leading` (a row rule's columns), the index must
 * start with those columns, in any order among themselves, then go on with the order's other columns: the
 * rows of one client then come in the order, and a column of the rule within the order is one value.
 */
export function servingIndex(relation: Relation, order: readonly OrderKey[], leading: readonly string[] = []): Index | undefined {
  return relation.indexes.find((index) => serves(relation, index, order, leading));
}

/** Whether the index's first columns are exactly `columns`, in any order (none: every index does). */
export function leadsWith(index: Index, columns: readonly string[]): boolean {
  const first = index.columns.slice(0, columns.length).map((column) => column.column);
  return first.length === columns.length && columns.every((column) => first.includes(column));
}

function serves(relation: Relation, index: Index, order: readonly OrderKey[], leading: readonly string[]): boolean {
  const rest = order.filter((entry) => !leading.includes(entry.column));
  if (!index.usable || index.columns.length < leading.length + rest.length || !leadsWith(index, leading)) return false;
  if (rest.length === 0) return leading.length > 0;
  const after = index.columns.slice(leading.length);
  const backward = after[0]!.descending !== rest[0]!.descending;
  return rest.every((entry, at) => {
    const indexed = after[at]!;
    if (indexed.column !== entry.column || (indexed.descending !== entry.descending) !== backward) return false;
    const nullable = relation.columns.find((column) => column.name === entry.column)?.nullable ?? true;
    return !nullable || (backward ? !indexed.nullsFirst : indexed.nullsFirst) === entry.descending;
  });
}

/**
 * The statement that makes an index serving `order` (the key appended) after `leading`:
 * `create index on public.orders (tenant_id, created_at, id)`. Directions are relative to the order's first
 * column (an index scanned backward serves the reverse), and `desc` puts NULLs first as ORDER BY … DESC does.
 */
export function indexForOrder(relation: QualifiedName, order: readonly OrderKey[], leading: readonly string[]): string {
  const rest = order.filter((entry) => !leading.includes(entry.column));
  const reversed = rest[0]?.descending ?? false;
  return createIndex(relation, [
    ...leading.map(sqlIdentifier),
    ...rest.map((entry) => `${sqlIdentifier(entry.column)}${entry.descending === reversed ? '' : ' desc'}`),
  ]);
}

/** The statement that makes an index for a filter on `column` after `leading`, with `operatorClass` for a prefix filter. */
export function indexForFilter(relation: QualifiedName, column: string, leading: readonly string[], operatorClass?: string): string {
  const columns = leading.includes(column) ? leading : [...leading, column];
  return createIndex(
    relation,
    columns.map((name) =>
      name === column && operatorClass !== undefined ? `${sqlIdentifier(name)} ${operatorClass}` : sqlIdentifier(name),
    ),
  );
}

function createIndex(relation: QualifiedName, columns: readonly string[]): string {
  return `create index on ${sqlIdentifier(relation.schema)}.${sqlIdentifier(relation.name)} (${columns.join(', ')})`;
}
