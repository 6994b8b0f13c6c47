// The collection registry: one declaration per collection drives validation, SQL, links and cost.
import type { SQL } from 'drizzle-orm';
import type { AnyPgColumn, PgTable } from 'drizzle-orm/pg-core';
import { type DeclaredType, declaredValueType, type FieldType, type ValueType } from './values.ts';

export type { FieldType } from './values.ts';
export type VariantName = 'offset' | 'page' | 'cursor' | 'time';
/** isnull: `field[isnull]=true` selects the rows where the field is NULL, `false` those where it is not. */
export type FilterOp = 'eq' | 'ne' | 'lt' | 'lte' | 'gt' | 'gte' | 'in' | 'prefix' | 'isnull';

export interface SortKey {
  readonly field: string;
  readonly descending: boolean;
}

/**
 * What a request costs, in allowance units (docs/reference/costs.md, "The rule";
 * lib/pagination/price.ts applies it). A unit is about a millisecond of database time: one unit per
 * started `itemsPerUnit` items of the chunk, plus one per whole `countedPerUnit` rows a count reads,
 * plus what the sort makes PostgreSQL read before the chunk: the rows an offset skips, and the whole
 * filtered set when no index serves the sort's first key.
 */
export interface CostRule {
  readonly itemsPerUnit: number;
  /** Rows a count reads per unit, as for an offset along the index it counts with. */
  readonly countedPerUnit: number;
  /**
   * The sort keys (and the time field) that an index on (key, id) serves, each with the number of rows
   * an offset skips along that index per unit (measured: docs/benchmarks.md, "What a unit buys"). A key missing here has no index.
   */
  readonly indexed: Readonly<Record<string, number>>;
  /**
   * Units added when the order's first key has no index, so that every chunk reads and sorts the filtered
   * rows: about the milliseconds a sort of the whole table takes. Required when a key lacks an index.
   */
  readonly unindexedSort?: number;
}

export interface CollectionDeclaration {
  readonly name: string;
  readonly table: PgTable;
  /**
   * Item fields in JSON order: name to column and type. `value` says how its values travel (default: the
   * declared way for its type: lib/pagination/values.ts, declaredValueType); `nullable` defaults to the column's lack of NOT NULL.
   */
  readonly fields: Readonly<Record<string, { column: AnyPgColumn; type: FieldType; value?: ValueType; nullable?: boolean }>>;
  /**
   * The fields that identify an item, the tie-breaker of every order and what cursors carry (default: `id`,
   * which must then be an integer field). They must be NOT NULL and unique together.
   */
  readonly key?: readonly string[];
  readonly variants: readonly VariantName[];
  readonly defaultVariant: VariantName;
  readonly filters: Readonly<Record<string, readonly FilterOp[]>>;
  readonly sortKeys: readonly string[];
  /** e.g. "-createdAt"; the key (`id`) is appended as the tie-breaker. */
  readonly defaultSort: string;
  /** The timestamp field the time variant pages over. */
  readonly timeField?: string;
  readonly pageSize: { readonly default: number; readonly max: number };
  readonly cost: CostRule;
  /**
   * The default count (no `count` parameter) is exact while the planner's estimate of the filtered set is
   * under this many rows, and the estimate from it on (default DEFAULT_COUNT_THRESHOLD).
   */
  readonly countThreshold?: number;
}

/** About a millisecond of counting on PostgreSQL (docs/rate-limit.md, "Counts"), so the default chunk stays cheap. */
const DEFAULT_COUNT_THRESHOLD = 10_000;

export interface Field {
  readonly name: string;
  readonly column: AnyPgColumn;
  readonly type: FieldType;
  /** How its values are selected, printed, carried in cursors and read from filters. */
  readonly value: ValueType;
  /** Whether it may hold NULL (a sort key that may is compared with expanded predicates: lib/pagination/keyset.ts). */
  readonly nullable: boolean;
  /** What the item selects: the column, or for a timestamp its exact epoch seconds (epochSeconds), which items print in JS. */
  readonly selection: AnyPgColumn | SQL.Aliased;
}

export interface Collection extends Omit<CollectionDeclaration, 'fields' | 'defaultSort' | 'countThreshold' | 'key'> {
  readonly fields: ReadonlyMap<string, Field>;
  /** The key's fields (`id` by default for a declared collection). */
  readonly key: readonly string[];
  readonly countThreshold: number;
  readonly selection: Record<string, AnyPgColumn | SQL.Aliased>;
  readonly defaultSort: readonly SortKey[];
}

/** "name,-priceCents" to sort keys, without the id tie-breaker; no validation. */
export function splitSort(text: string): SortKey[] {
  return text.split(',').map((part) => ({ field: part.replace(/^-/, ''), descending: part.startsWith('-') }));
}

/** Checks a declaration once, at start-up, and precomputes what requests need. */
export function defineCollection(declaration: CollectionDeclaration): Collection {
  const fields = new Map<string, Field>();
  const selection: Record<string, AnyPgColumn | SQL.Aliased> = {};
  const key = declaration.key ?? ['id'];
  for (const [name, entry] of Object.entries(declaration.fields)) {
    const { column, type } = entry;
    const value = entry.value ?? declaredValueType(type as DeclaredType);
    const select = value.select(column, name);
    // The key's fields hold no NULL whatever the column says (a view's columns are all nullable to the catalog).
    const nullable = !key.includes(name) && (entry.nullable ?? !column.notNull);
    fields.set(name, { name, column, type, value, nullable, selection: select });
    selection[name] = select;
  }
  const fail = (reason: string) => {
    throw new Error(`Invalid collection ${declaration.name}: ${reason}`);
  };
  if (declaration.key === undefined && fields.get('id')?.type !== 'bigint' && fields.get('id')?.type !== 'integer') {
    fail('it needs an integer id');
  }
  if (key.length === 0 || key.some((name) => !fields.has(name))) fail('its key names no field, or an unknown one');
  if (!declaration.variants.includes(declaration.defaultVariant)) fail('the default variant is not offered');
  for (const [field, ops] of Object.entries(declaration.filters)) {
    if (!fields.has(field)) fail(`filter on unknown field ${field}`);
    if (ops.includes('prefix') && fields.get(field)?.type !== 'text') fail(`prefix filter on non-text ${field}`);
  }
  for (const key of declaration.sortKeys) if (!fields.has(key)) fail(`sort key on unknown field ${key}`);
  const defaultSort = splitSort(declaration.defaultSort);
  for (const key of defaultSort) if (!fields.has(key.field)) fail(`default sort on unknown field ${key.field}`);
  const timeType = fields.get(declaration.timeField ?? '')?.type;
  if (declaration.variants.includes('time') && timeType !== 'timestamp' && timeType !== 'localTimestamp') {
    fail('the time variant needs a timestamp timeField');
  }
  const { indexed, unindexedSort, countedPerUnit } = declaration.cost;
  if (!(Number.isSafeInteger(countedPerUnit) && countedPerUnit > 0)) fail('countedPerUnit must be a positive whole number of rows');
  const countThreshold = declaration.countThreshold ?? DEFAULT_COUNT_THRESHOLD;
  if (!(Number.isSafeInteger(countThreshold) && countThreshold >= 0)) fail('countThreshold must be a whole number of rows');
  for (const [key, rows] of Object.entries(indexed)) {
    if (!fields.has(key)) fail(`cost of an index on unknown field ${key}`);
    if (!(Number.isSafeInteger(rows) && rows > 0)) fail(`cost of the index on ${key} must be a positive whole number of rows`);
  }
  // Every order a request can ask for must have a price: an index, or the surcharge of a sort without one.
  const orderKeys = [
    key[0]!,
    ...declaration.sortKeys,
    ...defaultSort.map((key) => key.field),
    ...(declaration.timeField ? [declaration.timeField] : []),
  ];
  const unindexed = orderKeys.find((key) => !Object.hasOwn(indexed, key));
  if (unindexed !== undefined && !(Number.isSafeInteger(unindexedSort) && unindexedSort! > 0)) {
    fail(`${unindexed} has no index declared in its cost rule, so the rule needs a positive unindexedSort`);
  }
  return Object.freeze({ ...declaration, key, fields, selection, defaultSort, countThreshold });
}

export type Registry = ReadonlyMap<string, Collection>;

export function createRegistry(collections: Collection[]): Registry {
  return new Map(collections.map((collection) => [collection.name, collection]));
}
