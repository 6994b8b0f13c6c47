// A collections file against the catalog model: every problem, one line each, and each good collection with what it left unsaid.
import { type CatalogModel, type Column, findRelation, qualifiedName, type Relation } from '../catalog/model.ts';
import { equalsClaim, operatorsFor, servedByDefault, sortable, valueKind } from './kinds.ts';
import type { Collection, CollectionAccess, CollectionField, CollectionKey, RowRule, ServedOrder } from './model.ts';
import { COLLECTION_NAME, camelCase, FIELD_NAME, PARAMETER_NAMES, parseRelationName } from './names.ts';
import { indexForOrder, leadsWith, type OrderKey, servingIndex, withKey } from './orders.ts';
import { problemLine } from './problems.ts';
import { safeDefaultWarnings } from './safe-defaults.ts';
import type { CollectionEntry, CollectionsFile, Operator, Variant } from './schema.ts';

export interface Resolution {
  /** The collections without problems. */
  readonly collections: readonly Collection[];
  /** Every problem, one line each (problemLine): `check` passes only without any. */
  readonly problems: readonly string[];
  /**
   * Of `problems`, those of the file itself, which it shows whatever the database holds (a name, a variant, a page
   * size, a column named but not served): the service does not start, nor take a reload, with any.
   */
  readonly fileProblems: readonly string[];
  /**
   * The collections whose every problem is of the catalog (a relation, column, type, key, index or privilege that
   * does not match the file, a materialized view not populated), by name, with their problems: the service serves
   * the others and answers these 503 collection_unavailable until the catalog matches again.
   */
  readonly unavailable: ReadonlyMap<string, readonly string[]>;
  /** What the collections serve by default that the file may not mean to, one line each (safeDefaultWarnings). */
  readonly warnings: readonly string[];
}

// The measured defaults of the demo collections (docs/reference/costs.md, "The rule"; docs/benchmarks.md, "What a unit buys").
const DEFAULT_PAGE_SIZE = { default: 20, max: 100 };
const DEFAULT_COUNT_THRESHOLD = 10_000;
const DEFAULT_VARIANTS: readonly Variant[] = ['offset', 'page', 'cursor'];
const ITEMS_PER_UNIT = 50;
const COUNTED_PER_UNIT = 5_000;
/** Rows an offset skips per unit along the key's index (the table read in order) and along any other (read at random). */
const SKIPPED_ALONG_KEY = 10_000;
const SKIPPED_ALONG_OTHER = 1_000;
/** A sort of a million rows without an index took 94 to 607 ms: about a unit per 10,000 rows. */
const SORTED_PER_UNIT = 10_000;
/** A relation without an estimate (a view, a table never analyzed) is priced as if a sort took this many units. */
const UNKNOWN_SORT_UNITS = 100;
/** Names a collection cannot take: the one under /v1 that is not a collection. */
const RESERVED_NAMES = new Set(['keys']);

/** Checks `file` (parsed by parseCollectionsFile) against `catalog`; `source` is how problems name the file. */
export function resolveCollections(file: CollectionsFile, catalog: CatalogModel, source: string): Resolution {
  const collections: Collection[] = [];
  const problems: string[] = [];
  const fileProblems: string[] = [];
  const unavailable = new Map<string, string[]>();
  const names = new Set<string>();
  file.collections.forEach((entry, at) => {
    const found: string[] = [];
    let ofFile = 0;
    const collection = resolveEntry(entry, catalog, (problem, of) => {
      found.push(problem);
      if (of === 'file') ofFile++;
    });
    const label = collection?.name ?? entry.name ?? labelOf(entry, at);
    if (names.has(label)) {
      found.push(`the name ${label} is taken by an earlier collection`);
      ofFile++;
    }
    names.add(label);
    const lines = found.map((problem) => problemLine(source, label, problem));
    problems.push(...lines);
    if (ofFile > 0) fileProblems.push(...lines);
    else if (lines.length > 0) unavailable.set(label, lines);
    if (collection && found.length === 0) collections.push(collection);
  });
  return { collections, problems, fileProblems, unavailable, warnings: safeDefaultWarnings(collections, source) };
}

function labelOf(entry: CollectionEntry, at: number): string {
  const relation = parseRelationName(entry.relation);
  return typeof relation === 'string' ? `#${at + 1}` : relation.name;
}

/** Reports a problem; `of`: 'file' when the file shows it by itself, whatever the catalog holds (Resolution.fileProblems). */
type Report = (problem: string, of?: 'file') => void;

/** The collection, or undefined when a problem leaves nothing to check further (no relation, no key). */
function resolveEntry(entry: CollectionEntry, catalog: CatalogModel, report: Report): Collection | undefined {
  const relation = findEntryRelation(entry, catalog, report);
  if (!relation) return undefined;
  const name = entry.name ?? relation.name;
  if (!COLLECTION_NAME.test(name))
    report(`the relation's name ${name} is no collection name (a letter, then letters, digits, _ and -): give one with name`, 'file');
  if (RESERVED_NAMES.has(name)) report(`the name ${name} is reserved`, 'file');

  const where = `in ${qualifiedName(relation)}`;
  const column = (name: string, what: string): Column | undefined => {
    const found = relation.columns.find((column) => column.name === name);
    if (!found)
      report(
        `${what} ${name}: no such column ${where}${suggestion(
          name,
          relation.columns.map((c) => c.name),
        )}`,
      );
    return found;
  };

  const fields = resolveFields(entry, relation, column, report);
  const exposed = (name: string, what: string): CollectionField | undefined => {
    const field = fields.find((field) => field.column.name === name);
    if (!field && column(name, what)) report(`${what} ${name} is not among the columns served`, 'file');
    return field;
  };
  const access = resolveAccess(entry, column, report);
  const key = resolveKey(entry, relation, exposed, report);
  if (!key) return undefined;

  // A client's rows are those whose rule columns equal its claims: an order is served within them by an index
  // that leads with those columns, which is what prices a client's read and what check tells the operator to create.
  const leading = access.rows.map((rule) => rule.column.name);
  const unindexedSorts = entry.unindexedSorts ?? false;
  const orderOf = (order: readonly OrderKey[]): ServedOrder => {
    const full = withKey(order, key.columns);
    return { order: full, index: servingIndex(relation, full, leading)?.name };
  };
  const orderable = (name: string, what: string): boolean => {
    const field = exposed(name, what);
    if (field && !sortable(field.kind)) report(`${what} ${name} is of type ${field.column.type.formatted}, which has no order to page by`);
    return field !== undefined && sortable(field.kind);
  };
  const indexed = (served: ServedOrder, what: string) => {
    if (served.index !== undefined || unindexedSorts) return;
    if (leading.length === 0) {
      report(`${what}: no btree index serves it (${orderText(served.order)}); add one, or accept it with unindexedSorts: true`);
      return;
    }
    const rest = served.order.filter((entry) => !leading.includes(entry.column));
    const create = relation.kind === 'view' ? 'a view has no index of its own' : indexForOrder(relation, served.order, leading);
    report(
      `${what}: no btree index serves it with the row rule's ${leading.join(', ')} leading (${leading.join(', ')}, then ${orderText(rest)}); ` +
        `${create}, or accept it with unindexedSorts: true`,
    );
  };

  const sorts: Record<string, ServedOrder> = {};
  if (entry.sort) {
    for (const name of new Set(entry.sort)) {
      if (!orderable(name, 'sort column')) continue;
      sorts[name] = orderOf([{ column: name, descending: false }]);
      indexed(sorts[name], `sort by ${name}`);
    }
  } else {
    // Unsaid: every column an index serves the order of.
    for (const field of fields) {
      const served = orderOf([{ column: field.column.name, descending: false }]);
      if (sortable(field.kind) && served.index !== undefined) sorts[field.column.name] = served;
    }
  }

  const orderKeys = parseOrder(entry.order).filter((entry) => orderable(entry.column, 'order column'));
  const order = orderOf(orderKeys);
  indexed(order, 'the default order');

  const variants = [...new Set(entry.variants ?? DEFAULT_VARIANTS)];
  const defaultVariant = entry.defaultVariant ?? (variants.includes('cursor') ? 'cursor' : variants[0]!);
  if (!variants.includes(defaultVariant)) report(`the default variant ${defaultVariant} is not among the variants`, 'file');
  // A cursor walk starts with page-size alone, which picks the time variant where it is the default, or with since_id,
  // which needs a key of one integer column (docs/reference/api.md, "Choosing the variant"): else no request could start one.
  const integerKey = key.columns.length === 1 && fields.find((field) => field.column.name === key.columns[0])?.kind === 'integer';
  if (defaultVariant === 'time' && variants.includes('cursor') && !integerKey) {
    report(
      'the cursor variant cannot be started beside a default time variant without a key of one integer column (since_id): drop it, or make it the default',
    );
  }
  const timeColumn = resolveTimeColumn(entry, relation, variants, exposed, report);
  const timeOrder = timeColumn === undefined ? undefined : orderOf([{ column: timeColumn, descending: false }]);
  if (timeOrder !== undefined) indexed(timeOrder, `the time variant's order by ${timeColumn}`);

  const filters = resolveFilters(entry, relation, fields, leading, exposed, report);
  const pageSize = resolvePageSize(entry, report);

  return {
    name,
    relation,
    fields,
    columnsListed: entry.columns !== undefined,
    key,
    variants,
    defaultVariant,
    ...(timeColumn === undefined ? {} : { timeColumn }),
    filters,
    sorts,
    order,
    unindexedSorts,
    pageSize,
    countThreshold: entry.countThreshold ?? DEFAULT_COUNT_THRESHOLD,
    // Every order a chunk can start with is priced: the key's own (every order ends with it), the time
    // variant's and the default one.
    cost: resolveCost(
      entry,
      relation,
      key,
      leading,
      {
        [key.columns[0]!]: orderOf([]),
        ...(timeOrder === undefined ? {} : { [timeColumn!]: timeOrder }),
        [order.order[0]!.column]: order,
        ...sorts,
        ...(orderKeys[0] ? { [orderKeys[0].column]: order } : {}),
      },
      exposed,
    ),
    access,
  };
}

function findEntryRelation(entry: CollectionEntry, catalog: CatalogModel, report: Report): Relation | undefined {
  const name = parseRelationName(entry.relation);
  if (typeof name === 'string') {
    report(`relation ${entry.relation} ${name}`, 'file');
    return undefined;
  }
  const relation = findRelation(catalog, name);
  if (!relation) {
    const near = catalog.relations.filter(
      (r) => r.schema.toLowerCase() === name.schema.toLowerCase() && r.name.toLowerCase() === name.name.toLowerCase(),
    );
    const hint = near[0] ? ` (did you mean ${qualifiedName(near[0])}?)` : '';
    report(`no relation ${qualifiedName(name)} in the database, or in the schemas read${hint}`);
    return undefined;
  }
  if (relation.partitionOf) {
    report(`${qualifiedName(relation)} is a partition of ${qualifiedName(relation.partitionOf)}: serve the partitioned table`);
    return undefined;
  }
  // Every chunk of it would be an error (SQLSTATE 55000), which a check that passed should not leave to be found.
  if (!relation.populated) {
    report(`${qualifiedName(relation)} is a materialized view that has not been populated: REFRESH MATERIALIZED VIEW it first`);
  }
  return relation;
}

function resolveFields(
  entry: CollectionEntry,
  relation: Relation,
  column: (name: string, what: string) => Column | undefined,
  report: Report,
): CollectionField[] {
  const fields: CollectionField[] = [];
  const columns = entry.columns
    ? [...new Set(entry.columns)].map((name) => column(name, 'column')).filter((c) => c !== undefined)
    : relation.columns.filter((c) => servedByDefault(valueKind(c.type)));
  // `fields` names single columns, over fieldNames; each must be one of the columns served.
  const named = new Map(Object.entries(entry.fields ?? {}));
  for (const name of named.keys()) {
    if (column(name, 'fields column') && !columns.some((c) => c.name === name))
      report(`fields column ${name} is not among the columns served`, 'file');
  }
  for (const c of columns) {
    const kind = valueKind(c.type);
    if (kind === undefined) {
      report(`column ${c.name} is of type ${c.type.formatted}, which the service does not serve`);
      continue;
    }
    if (!c.selectable) {
      const fix = entry.columns ? 'grant it, or leave it out' : 'grant it, or list the columns to serve';
      report(`column ${c.name}: the role may not SELECT it; ${fix}`);
      continue;
    }
    const given = named.get(c.name);
    const name = given ?? (entry.fieldNames === 'camelCase' ? camelCase(c.name) : c.name);
    if (!FIELD_NAME.test(name)) {
      report(noFieldName(c.name, name, entry.fieldNames === 'camelCase'));
      continue;
    }
    const same = fields.find((field) => field.name === name);
    if (same) report(`columns ${same.column.name} and ${c.name} would both be field ${name}: name one of them with fields`);
    else fields.push({ name, column: c, kind });
  }
  return fields;
}

/**
 * The problem of a column whose field would be no field name (ASCII: lib/collections/names.ts), with the way out:
 * camelCase where it makes one, else a name of `fields`.
 */
function noFieldName(column: string, name: string, camel: boolean): string {
  const problem = `column ${column} would be field ${JSON.stringify(name)}, no field name (an ASCII letter or _, then ASCII letters, digits and _)`;
  const key = /^[\p{L}_][\p{L}\p{N}_]*$/u.test(column) ? column : JSON.stringify(column);
  const camelCased = camelCase(column);
  if (!camel && FIELD_NAME.test(camelCased))
    return `${problem}: use fieldNames: camelCase (${camelCased}), name it with fields: { ${key}: … }, or leave it out`;
  return `${problem}: name it with fields: { ${key}: … } (a field name of your choice), or leave it out`;
}

/**
 * The file's `access`: each rule's column, which must exist and be of a type a claim can equal, but need not be
 * served (a team may not serve tenant_id), and its claim's path. A collection with rows is never read anonymously.
 */
function resolveAccess(
  entry: CollectionEntry,
  column: (name: string, what: string) => Column | undefined,
  report: Report,
): CollectionAccess {
  const rows: RowRule[] = [];
  for (const [name, claim] of Object.entries(entry.access?.rows ?? {})) {
    const found = column(name, 'access.rows column');
    if (!found) continue;
    if (!equalsClaim(found.type)) {
      report(
        `access.rows column ${name} is of type ${found.type.formatted}, which no claim can equal: a row rule's column is text, an integer, a numeric, a uuid or an enum`,
      );
    } else if (!found.selectable) {
      report(`access.rows column ${name}: the role may not SELECT it, which the rule's condition needs; grant it`);
    } else rows.push({ column: found, claim: claim.split('.') });
  }
  const rules = entry.access?.rows !== undefined;
  if (entry.access?.anonymous === true && rules) {
    report('access.anonymous is true beside access.rows: a collection with rows is never read anonymously; leave anonymous out', 'file');
  }
  return { anonymous: !rules && (entry.access?.anonymous ?? true), rows };
}

function resolveKey(
  entry: CollectionEntry,
  relation: Relation,
  exposed: (name: string, what: string) => CollectionField | undefined,
  report: Report,
): CollectionKey | undefined {
  const isView = relation.kind === 'view' || relation.kind === 'materialized view';
  let key: CollectionKey;
  if (entry.key) key = { columns: [...new Set(entry.key)], source: 'file' };
  else if (relation.primaryKey) key = { columns: relation.primaryKey.columns, source: 'primary key' };
  else if (relation.uniqueKeys[0]) key = { columns: relation.uniqueKeys[0].columns, source: 'unique key' };
  else {
    report(
      isView
        ? `a ${relation.kind} has no key the catalog knows: name its columns with key`
        : 'it has no primary key nor unique key over NOT NULL columns: name one with key',
    );
    return undefined;
  }
  let usable = true;
  for (const name of key.columns) {
    const field = exposed(name, 'key column');
    if (!field) usable = false;
    else if (!sortable(field.kind)) {
      report(`key column ${name} is of type ${field.column.type.formatted}, which cannot be a key`);
      usable = false;
    } else if (field.column.nullable && !isView) {
      // A view's columns are all nullable as far as the catalog knows: the file vouches for its key.
      report(`key column ${name} is nullable: a key's columns must be NOT NULL`);
      usable = false;
    }
  }
  return usable ? key : undefined;
}

function resolveTimeColumn(
  entry: CollectionEntry,
  relation: Relation,
  variants: readonly Variant[],
  exposed: (name: string, what: string) => CollectionField | undefined,
  report: Report,
): string | undefined {
  if (!variants.includes('time')) {
    if (entry.timeColumn !== undefined) report('timeColumn is set but the time variant is not offered', 'file');
    return undefined;
  }
  if (entry.timeColumn === undefined) {
    report('the time variant needs a timeColumn', 'file');
    return undefined;
  }
  const field = exposed(entry.timeColumn, 'timeColumn');
  if (!field) return undefined;
  if (field.kind !== 'timestamptz' && field.kind !== 'timestamp') {
    report(`timeColumn ${field.column.name} is of type ${field.column.type.formatted}, not a timestamp`);
    return undefined;
  }
  if (field.column.nullable && relation.kind !== 'view' && relation.kind !== 'materialized view') {
    report(`timeColumn ${field.column.name} is nullable: the time variant would never show its NULL rows`);
  }
  return field.column.name;
}

function resolveFilters(
  entry: CollectionEntry,
  relation: Relation,
  fields: readonly CollectionField[],
  leading: readonly string[],
  exposed: (name: string, what: string) => CollectionField | undefined,
  report: Report,
): Record<string, readonly Operator[]> {
  const filters: Record<string, readonly Operator[]> = {};
  if (!entry.filters) {
    // Unsaid: equality on every column that leads a btree index (after the row rule's columns, with rows).
    for (const field of fields) {
      const name = field.column.name;
      const leads = relation.indexes.some(
        (index) => leadsWith(index, leading) && (leading.includes(name) || index.columns[leading.length]?.column === name),
      );
      if (leads && operatorsFor(field.kind).includes('eq') && !PARAMETER_NAMES.has(field.name)) filters[field.column.name] = ['eq'];
    }
    return filters;
  }
  for (const [name, operators] of Object.entries(entry.filters)) {
    const field = exposed(name, 'filter column');
    if (!field) continue;
    const meaningful = operatorsFor(field.kind);
    const wrong = operators.filter((op) => !meaningful.includes(op));
    if (wrong.length > 0) {
      const takes = meaningful.length === 0 ? 'which takes no filters' : `which takes ${meaningful.join(', ')}`;
      report(`filter ${name}: ${wrong.join(', ')} is not meaningful for type ${field.column.type.formatted}, ${takes}`);
      continue;
    }
    if (PARAMETER_NAMES.has(field.name)) {
      report(
        `filter ${name}: field ${field.name} would be read as the query parameter ${field.name}; rename it with fields or fieldNames, or do not filter it`,
        'file',
      );
      continue;
    }
    filters[name] = [...new Set(operators)];
  }
  return filters;
}

function resolvePageSize(entry: CollectionEntry, report: Report): { default: number; max: number } {
  const max = entry.pageSize?.max ?? Math.max(DEFAULT_PAGE_SIZE.max, entry.pageSize?.default ?? 0);
  const pageSize = { default: entry.pageSize?.default ?? Math.min(DEFAULT_PAGE_SIZE.default, max), max };
  if (pageSize.default > pageSize.max) report(`pageSize.default ${pageSize.default} is over pageSize.max ${pageSize.max}`, 'file');
  return pageSize;
}

function resolveCost(
  entry: CollectionEntry,
  relation: Relation,
  key: CollectionKey,
  leading: readonly string[],
  orders: Readonly<Record<string, ServedOrder>>,
  exposed: (name: string, what: string) => CollectionField | undefined,
): Collection['cost'] {
  const indexed: Record<string, number> = {};
  for (const [column, served] of Object.entries(orders)) {
    if (served.index === undefined) continue;
    // The index whose leading columns are the key's reads the table in the key's order; with rows, a client's
    // rows in the key's order (the rule's columns, each one value, left out of both).
    const order = served.order.filter((entry) => !leading.includes(entry.column));
    const alongKey = key.columns.filter((name) => !leading.includes(name)).every((name, at) => order[at]?.column === name);
    indexed[column] = alongKey ? SKIPPED_ALONG_KEY : SKIPPED_ALONG_OTHER;
  }
  for (const [column, rows] of Object.entries(entry.cost?.indexed ?? {}))
    if (exposed(column, 'cost.indexed column')) indexed[column] = rows;
  const rows = relation.estimatedRows;
  return {
    itemsPerUnit: entry.cost?.itemsPerUnit ?? ITEMS_PER_UNIT,
    countedPerUnit: entry.cost?.countedPerUnit ?? COUNTED_PER_UNIT,
    indexed,
    unindexedSort: entry.cost?.unindexedSort ?? (rows === undefined ? UNKNOWN_SORT_UNITS : Math.max(1, Math.ceil(rows / SORTED_PER_UNIT))),
  };
}

/** The file's `order`: a list, or a comma list, of columns each optionally prefixed with `-`. */
function parseOrder(order: CollectionEntry['order']): OrderKey[] {
  const parts = order === undefined ? [] : typeof order === 'string' ? order.split(',') : order;
  return parts
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part) => (part.startsWith('-') ? { column: part.slice(1), descending: true } : { column: part, descending: false }));
}

function orderText(order: readonly OrderKey[]): string {
  return order.map((entry) => (entry.descending ? `-${entry.column}` : entry.column)).join(', ');
}

/** ` (did you mean X?)` for a name that differs from one of `names` only in case. */
function suggestion(name: string, names: readonly string[]): string {
  const near = names.find((candidate) => candidate.toLowerCase() === name.toLowerCase());
  return near === undefined ? '' : ` (did you mean ${near}?)`;
}
