// Runtime collections: a collection of the collections file, resolved against the catalog (lib/collections), as the
// registry's Collection that validation, SQL, links and costs are driven by, over a Drizzle table built at run time.
import { createHash } from 'node:crypto';
import { getTableColumns, type SQL } from 'drizzle-orm';
import { type AnyPgColumn, customType, type PgColumnBuilderBase, pgSchema, pgTable } from 'drizzle-orm/pg-core';
import type { Sql } from 'postgres';
import type { CatalogModel } from '../catalog/model.ts';
import { type ReadCatalogOptions, readCatalog } from '../catalog/read.ts';
import { valueKind } from '../collections/kinds.ts';
import type { Collection as ResolvedCollection } from '../collections/model.ts';
import { parseCollectionsFile } from '../collections/parse.ts';
import { CollectionsFileError } from '../collections/problems.ts';
import { resolveCollections } from '../collections/resolve.ts';
import type { CollectionsFile } from '../collections/schema.ts';
import {
  type Collection,
  type CollectionAccess,
  type CostRule,
  createRegistry,
  type Field,
  type Registry,
  type RowRule,
  type SortKey,
} from './registry.ts';
import { sortParam, withTieBreaker } from './sort.ts';
import { runtimeValueType } from './values.ts';

/**
 * A column of any type: Drizzle only writes its name (quoted, so any case) into SQL; the values are selected and
 * printed by the field's value type (lib/pagination/values.ts), and rows come back as arrays (lib/pagination/shapes.ts).
 */
const anyColumn = customType<{ data: unknown; driverData: unknown }>({ dataType: () => 'unknown' });

/**
 * The registry's collection of a resolved one: its relation as a Drizzle table (pgSchema(schema).table, or
 * pgTable in public, columns by their exact catalog names), its fields with their value types, its key as the
 * tie-breaker of every order, its filters, sorts, default order, variants, page sizes and cost rule as resolved,
 * and its access: each row rule's field the served one, or, for a column not served, a field of its own (`@column`).
 */
export function collectionOf(resolved: ResolvedCollection): Collection {
  const { relation } = resolved;
  const keyColumns = resolved.key.columns;
  const builders: Record<string, PgColumnBuilderBase> = {};
  resolved.fields.forEach((field, at) => {
    const builder = anyColumn(field.column.name);
    // A key column holds no NULL, whatever the catalog says of a view's.
    const notNull = !field.column.nullable || keyColumns.includes(field.column.name);
    // Keys of our own: a column's name could be one of the table object's own (enableRLS).
    builders[`c${at}`] = notNull ? builder.notNull() : builder;
  });
  const fieldNames = new Map(resolved.fields.map((field) => [field.column.name, field.name]));
  // A row rule's column that is not served has a column of its own in the table object, for the rule's condition.
  const unserved = resolved.access.rows.filter((rule) => !fieldNames.has(rule.column.name));
  unserved.forEach((rule, at) => {
    const builder = anyColumn(rule.column.name);
    builders[`r${at}`] = rule.column.nullable ? builder : builder.notNull();
  });
  const table = relation.schema === 'public' ? pgTable(relation.name, builders) : pgSchema(relation.schema).table(relation.name, builders);
  const columns = getTableColumns(table) as Record<string, AnyPgColumn>;
  const fieldOf = (column: string) => fieldNames.get(column)!;

  const fields = new Map<string, Field>();
  const selection: Record<string, AnyPgColumn | SQL.Aliased> = {};
  resolved.fields.forEach((field, at) => {
    const column = columns[`c${at}`]!;
    const elementKind = field.column.type.element ? valueKind(field.column.type.element) : undefined;
    const value = runtimeValueType(field.kind, field.column.type, elementKind);
    const nullable = field.column.nullable && !keyColumns.includes(field.column.name);
    const select = value.select(column, field.name);
    fields.set(field.name, { name: field.name, column, type: value.type, value, nullable, selection: select });
    selection[field.name] = select;
  });
  const key = keyColumns.map(fieldOf);
  const rows = resolved.access.rows.map((rule): RowRule => {
    const served = fieldNames.get(rule.column.name);
    if (served !== undefined) return { claim: rule.claim, field: fields.get(served)! };
    const name = `@${rule.column.name}`;
    const column = columns[`r${unserved.indexOf(rule)}`]!;
    const value = runtimeValueType(valueKind(rule.column.type)!, rule.column.type);
    // Never in fields nor selection: no parameter names it and no item shows it.
    return {
      claim: rule.claim,
      field: { name, column, type: value.type, value, nullable: rule.column.nullable, selection: value.select(column, name) },
    };
  });
  return Object.freeze({
    name: resolved.name,
    table,
    fields,
    key,
    variants: resolved.variants,
    defaultVariant: resolved.defaultVariant,
    filters: Object.fromEntries(Object.entries(resolved.filters).map(([column, operators]) => [fieldOf(column), operators])),
    sortKeys: Object.keys(resolved.sorts).map(fieldOf),
    defaultSort: shortestOrder(
      resolved.order.order.map((entry) => ({ field: fieldOf(entry.column), descending: entry.descending })),
      key,
    ),
    ...(resolved.timeColumn === undefined ? {} : { timeField: fieldOf(resolved.timeColumn) }),
    pageSize: resolved.pageSize,
    cost: costRuleOf(resolved, fieldOf),
    countThreshold: resolved.countThreshold,
    selection,
    access: Object.freeze<CollectionAccess>({ anonymous: resolved.access.anonymous, rows }),
  });
}

/**
 * An order without the key's fields that the tie-breaker appends anyway (lib/pagination/sort.ts): `-createdAt` for
 * `-createdAt,-id`, as the documentation and links write the default order.
 */
function shortestOrder(order: readonly SortKey[], key: readonly string[]): readonly SortKey[] {
  const whole = sortParam(order);
  for (let length = 1; length < order.length; length++) {
    if (sortParam(withTieBreaker(order.slice(0, length), key)) === whole) return order.slice(0, length);
  }
  return order;
}

/** lib/collections' cost settings (per column) as the registry's cost rule (per field). */
function costRuleOf(resolved: ResolvedCollection, fieldOf: (column: string) => string): CostRule {
  const { cost } = resolved;
  return {
    itemsPerUnit: cost.itemsPerUnit,
    countedPerUnit: cost.countedPerUnit,
    indexed: Object.fromEntries(Object.entries(cost.indexed).map(([column, rows]) => [fieldOf(column), rows])),
    unindexedSort: cost.unindexedSort,
  };
}

/**
 * The registry of a collections file: its text parsed (`source` names it in problems: YAML, or JSON when it ends
 * in .json), the catalog read once on `sql` (the schemas of `options`, the service's own left out), the file
 * resolved against it, and each collection made a runtime one (collectionOf). Throws a CollectionsFileError with
 * every problem, one line each, when the file cannot be served; `warn` gets what it serves by default that it may
 * not mean to (a column named as a secret, no columns list: lib/collections/safe-defaults.ts), one line each.
 */
export async function loadRegistry(
  sql: Sql,
  fileText: string,
  source: string,
  { warn, ...options }: ReadCatalogOptions & { readonly warn?: (line: string) => void },
): Promise<Registry> {
  const file = parseCollectionsFile(fileText, source);
  return registryOf(file, await readCatalog(sql, options), source, warn);
}

/**
 * The registry of a collections file's text resolved against a catalog already read (the demo's snapshot:
 * demo/collections.ts); throws as loadRegistry does.
 */
export function resolveRegistry(fileText: string, source: string, catalog: CatalogModel): Registry {
  return registryOf(parseCollectionsFile(fileText, source), catalog, source);
}

/**
 * What a collections file serves against the catalog as it is now: the registry of the collections that resolve,
 * and those whose problems are all of the catalog, unavailable until it matches again (lib/collections/resolve.ts,
 * Resolution.unavailable).
 */
export interface Served {
  readonly registry: Registry;
  /** By name, each with its problems, one line each. */
  readonly unavailable: ReadonlyMap<string, readonly string[]>;
  /** What the file serves by default that it may not mean to, one line each (lib/collections/safe-defaults.ts). */
  readonly warnings: readonly string[];
  /** Which file and catalog these are: a digest of the file's text and of what each collection was resolved to. */
  readonly hash: string;
  /** Each served collection's facts as resolved (the catalog's changing estimates and numbering left out). */
  readonly facts: ReadonlyMap<string, string>;
}

/**
 * Reads the file's text and the catalog (on `sql`, in one snapshot) into what it serves, as loadRegistry does, but
 * serves what it can: a collection whose every problem is of the catalog is left unavailable rather than stopping
 * the others. Throws a CollectionsFileError when the text does not parse or the file itself is wrong
 * (Resolution.fileProblems). A collection whose facts are those it had in `earlier` keeps its runtime value, and
 * with it the statements prepared for it (lib/pagination/shapes.ts).
 */
export async function loadServed(
  sql: Sql,
  fileText: string,
  source: string,
  { earlier, ...options }: ReadCatalogOptions & { readonly earlier?: Served | undefined },
): Promise<Served> {
  const file = parseCollectionsFile(fileText, source);
  const { collections, problems, fileProblems, unavailable, warnings } = resolveCollections(file, await readCatalog(sql, options), source);
  if (fileProblems.length > 0) throw new CollectionsFileError(problems);
  const facts = new Map(collections.map((collection) => [collection.name, factsOf(collection)]));
  const served = collections.map((collection) => {
    const kept = earlier?.registry.get(collection.name);
    return kept !== undefined && earlier?.facts.get(collection.name) === facts.get(collection.name) ? kept : collectionOf(collection);
  });
  const hash = createHash('sha256')
    .update(fileText)
    .update('\0')
    .update(JSON.stringify([...facts, ...unavailable]))
    .digest('hex');
  return { registry: createRegistry(served), unavailable, warnings, hash: hash.slice(0, 12), facts };
}

/**
 * A resolved collection as text, without what does not change what is served: the planner's estimate of the rows
 * (the cost it gives is in the collection already) and the catalog's numbering of relations and columns.
 */
function factsOf(collection: ResolvedCollection): string {
  return JSON.stringify(collection, (key, value) => (key === 'estimatedRows' || key === 'oid' || key === 'attnum' ? undefined : value));
}

function registryOf(file: CollectionsFile, catalog: CatalogModel, source: string, warn?: (line: string) => void): Registry {
  const { collections, problems, warnings } = resolveCollections(file, catalog, source);
  if (problems.length > 0) throw new CollectionsFileError(problems);
  for (const line of warnings) warn?.(line);
  return createRegistry(collections.map(collectionOf));
}
