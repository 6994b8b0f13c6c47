// `check`'s report: for each collection of a file, which index serves each order and filter, or what it costs without one.
import { qualifiedName, type Relation } from '../catalog/model.ts';
import type { Collection, ServedOrder } from './model.ts';
import { type OrderKey, servingIndex, withKey } from './orders.ts';

/**
 * The lines `npm run collections -- check` prints for collections that resolved: a heading per collection,
 * then, indented, its default order, each sort, the time variant's order, each filter and the count, each
 * with the index that serves it or, when none does, what the cost rule charges for it (docs/reference/collections-file.md,
 * "Tools"). Stable: the same collections give the same lines.
 */
export function checkReport(collections: readonly Collection[]): string[] {
  return collections.flatMap((collection) => collectionLines(collection));
}

function collectionLines(collection: Collection): string[] {
  const { relation, key, cost } = collection;
  const variants = collection.variants.map((variant) => (variant === collection.defaultVariant ? `${variant} (default)` : variant));
  const lines = [
    `${collection.name}: ${qualifiedName(relation)} (${relation.kind}), key ${key.columns.join(', ')} (${key.source}), variants ${variants.join(', ')}`,
  ];
  const line = (text: string) => lines.push(`  ${text}`);
  line(`default order ${orderText(collection.order.order)}: ${orderCost(collection, collection.order)}`);
  for (const [column, served] of Object.entries(collection.sorts)) line(`sort ${column}: ${orderCost(collection, served)}`);
  if (collection.timeColumn !== undefined) {
    const order = timeOrder(collection);
    line(`time variant by ${collection.timeColumn}: ${order === undefined ? 'as the sort above' : orderCost(collection, order)}`);
  }
  for (const [column, operators] of Object.entries(collection.filters)) {
    const ordered = operators.filter((operator) => operator !== 'prefix');
    if (ordered.length > 0) line(`filter ${column} ${ordered.join(', ')}: ${filterCost(relation, column, true)}`);
    if (operators.includes('prefix')) line(`filter ${column} prefix: ${filterCost(relation, column, false)}`);
  }
  line(
    `count: exact under ${collection.countThreshold} filtered rows (estimated from there on), 1 unit per ${cost.countedPerUnit} rows counted; ` +
      `a chunk costs 1 unit per ${cost.itemsPerUnit} items`,
  );
  return lines;
}

/** The time variant's order when it is not among the sorts already reported. */
function timeOrder(collection: Collection): ServedOrder | undefined {
  const column = collection.timeColumn!;
  if (collection.sorts[column] !== undefined) return undefined;
  const first = collection.order.order[0];
  if (first?.column === column && !first.descending) return collection.order;
  // Not a sort of the collection: found as resolveCollections checked it, ascending, then the key.
  const order = withKey([{ column, descending: false }], collection.key.columns);
  return { order, index: servingIndex(collection.relation, order)?.name };
}

function orderCost(collection: Collection, served: ServedOrder): string {
  if (served.index === undefined) {
    const unknown = collection.relation.estimatedRows === undefined ? ' (no estimate of its rows: a view, or a table never analyzed)' : '';
    return `no index: every chunk reads and sorts the filtered rows, +${units(collection.cost.unindexedSort)}${unknown}`;
  }
  const skipped = collection.cost.indexed[served.order[0]!.column];
  return skipped === undefined ? `index ${served.index}` : `index ${served.index}; an offset costs 1 unit per ${skipped} rows skipped`;
}

/**
 * The index a filter on `column` can use: a whole (not partial) btree index that leads with it, ordering it
 * as the column (`ordered`: =, <, IN, IS NULL…) or by text_pattern_ops or the C collation (LIKE 'x%', prefix).
 */
function filterCost(relation: Relation, column: string, ordered: boolean): string {
  const leading = relation.indexes.filter((index) => !index.partial && index.columns[0]?.column === column);
  const index = ordered
    ? (leading.find((candidate) => candidate.columns[0]!.ordersAsColumn) ?? leading[0])
    : leading.find((candidate) => !candidate.columns[0]!.ordersAsColumn);
  if (index !== undefined) return `index ${index.name}`;
  const which = ordered ? 'no index leads with it' : 'no index of text_pattern_ops or the C collation leads with it';
  const partial = relation.indexes.filter((candidate) => candidate.partial && candidate.columns[0]?.column === column);
  const only = partial.length > 0 ? ` (only the partial ${partial.map((p) => p.name).join(', ')})` : '';
  return `${which}${only}: each chunk tests rows along its order until its page is full, which the cost rule does not charge for`;
}

function orderText(order: readonly OrderKey[]): string {
  return order.map((entry) => (entry.descending ? `-${entry.column}` : entry.column)).join(', ');
}

function units(count: number): string {
  return `${count} unit${count === 1 ? '' : 's'}`;
}
