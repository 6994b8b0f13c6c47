// `check`'s report: for each collection of a file, which index serves each order and filter, or what it costs without one.
import { type Index, qualifiedName, type Relation } from '../catalog/model.ts';
import type { Collection, ServedOrder } from './model.ts';
import { indexForFilter, indexForOrder, leadsWith, type OrderKey, servingIndex, withKey } from './orders.ts';

/**
 * The lines `npm run collections -- check` prints for collections that resolved: a heading per collection,
 * then, indented, what a test of a key the file names found (`keyLines`, by collection), who reads it when not everyone reads every row, its default order, each sort, the time
 * variant's order, each filter and the count, each with the index that serves it or, when none does, what the
 * cost rule charges for it (docs/reference/collections-file.md, "Tools"). With row rules, an index serves only
 * when the rules' columns lead it, and a line under each that none serves says what to create. Stable: the
 * same collections give the same lines.
 */
export function checkReport(collections: readonly Collection[], keyLines: ReadonlyMap<string, string> = new Map()): string[] {
  return collections.flatMap((collection) => collectionLines(collection, keyLines.get(collection.name)));
}

/** `keyLine`: what a test of the key found, when check tested it (scripts/collections-keys.ts). */
function collectionLines(collection: Collection, keyLine: string | undefined): string[] {
  const { relation, key, cost, access } = collection;
  const leading = access.rows.map((rule) => rule.column.name);
  const variants = collection.variants.map((variant) => (variant === collection.defaultVariant ? `${variant} (default)` : variant));
  const lines = [
    `${collection.name}: ${qualifiedName(relation)} (${relation.kind}), key ${key.columns.join(', ')} (${key.source}), variants ${variants.join(', ')}`,
  ];
  const line = (text: string) => lines.push(`  ${text}`);
  if (keyLine !== undefined) line(keyLine);
  // What to create, on a line of its own to copy; a view has no index of its own to create.
  const create = (statement: string) => {
    if (leading.length > 0 && relation.kind !== 'view') lines.push(`    ${statement};`);
  };
  if (leading.length > 0) {
    const rules = access.rows.map((rule) => `${rule.column.name} = claim ${rule.claim.join('.')}`).join(' and ');
    line(`rows: ${rules} (never read anonymously); every index below leads with ${leading.join(', ')}`);
  } else if (!access.anonymous) line('rows: every row, to clients with credentials only (no anonymous reads)');
  const order = (text: string, served: ServedOrder) => {
    line(`${text}: ${orderCost(collection, served)}`);
    if (served.index === undefined) create(indexForOrder(relation, served.order, leading));
  };
  order(`default order ${orderText(collection.order.order)}`, collection.order);
  for (const [column, served] of Object.entries(collection.sorts)) order(`sort ${column}`, served);
  if (collection.timeColumn !== undefined) {
    const served = timeOrder(collection, leading);
    if (served === undefined) line(`time variant by ${collection.timeColumn}: as the sort above`);
    else order(`time variant by ${collection.timeColumn}`, served);
  }
  for (const [column, operators] of Object.entries(collection.filters)) {
    for (const ordered of [true, false]) {
      const these = operators.filter((operator) => (operator === 'prefix') !== ordered);
      if (these.length === 0) continue;
      const index = filterIndex(relation, column, ordered, leading);
      line(
        `filter ${column} ${these.join(', ')}: ${index === undefined ? noFilterIndex(relation, column, ordered, leading) : `index ${index.name}`}`,
      );
      if (index === undefined)
        create(indexForFilter(relation, column, leading, ordered ? undefined : patternOperatorClass(relation, column)));
    }
  }
  line(
    `count: exact under ${collection.countThreshold} filtered rows (estimated from there on), 1 unit per ${cost.countedPerUnit} rows counted; ` +
      `a chunk costs 1 unit per ${cost.itemsPerUnit} items`,
  );
  return lines;
}

/** The time variant's order when it is not among the sorts already reported. */
function timeOrder(collection: Collection, leading: readonly string[]): ServedOrder | undefined {
  const column = collection.timeColumn!;
  if (collection.sorts[column] !== undefined) return undefined;
  const first = collection.order.order[0];
  if (first?.column === column && !first.descending) return collection.order;
  // Not a sort of the collection: found as resolveCollections checked it, ascending, then the key.
  const order = withKey([{ column, descending: false }], collection.key.columns);
  return { order, index: servingIndex(collection.relation, order, leading)?.name };
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
 * The index a filter on `column` can use: a whole (not partial) btree index that leads with it (after the row
 * rule's columns, with rows), ordering it as the column (`ordered`: =, <, IN, IS NULL…) or by text_pattern_ops
 * or the C collation (LIKE 'x%', prefix). A filter on a rule's column is served by any index the rule's columns lead.
 */
function filterIndex(relation: Relation, column: string, ordered: boolean, leading: readonly string[]): Index | undefined {
  const candidates = filterCandidates(relation, column, leading).filter((index) => !index.partial);
  if (leading.includes(column)) return candidates[0];
  const at = leading.length;
  return ordered
    ? (candidates.find((candidate) => candidate.columns[at]!.ordersAsColumn) ?? candidates[0])
    : candidates.find((candidate) => !candidate.columns[at]!.ordersAsColumn);
}

function filterCandidates(relation: Relation, column: string, leading: readonly string[]): Index[] {
  return relation.indexes.filter(
    (index) =>
      leadsWith(index, leading) && (leading.includes(column) ? leading.length > 0 : index.columns[leading.length]?.column === column),
  );
}

function noFilterIndex(relation: Relation, column: string, ordered: boolean, leading: readonly string[]): string {
  const it = leading.length === 0 ? 'it' : `${leading.join(', ')}, then it`;
  const which = ordered ? `no index leads with ${it}` : `no index of text_pattern_ops or the C collation leads with ${it}`;
  const partial = filterCandidates(relation, column, leading).filter((candidate) => candidate.partial);
  const only = partial.length > 0 ? ` (only the partial ${partial.map((p) => p.name).join(', ')})` : '';
  return `${which}${only}: each chunk tests rows along its order until its page is full, which the cost rule does not charge for`;
}

/** The operator class an index serving LIKE 'x%' on the column needs under a collation other than C. */
function patternOperatorClass(relation: Relation, column: string): string {
  const type = relation.columns.find((candidate) => candidate.name === column)?.type.name;
  return type === 'bpchar' ? 'bpchar_pattern_ops' : type === 'varchar' ? 'varchar_pattern_ops' : 'text_pattern_ops';
}

function orderText(order: readonly OrderKey[]): string {
  return order.map((entry) => (entry.descending ? `-${entry.column}` : entry.column)).join(', ');
}

function units(count: number): string {
  return `${count} unit${count === 1 ? '' : 's'}`;
}
