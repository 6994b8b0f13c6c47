// The collection registry: the collections served, each driving validation, SQL, links and cost.
import type { SQL } from 'drizzle-orm';
import type { AnyPgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { FieldType, ValueType } from './values.ts';

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
   * rows: about the milliseconds a sort of the whole table takes (the file's, or from the relation's estimated rows).
   */
  readonly unindexedSort: number;
}

export interface Field {
  readonly name: string;
  readonly column: AnyPgColumn;
  readonly type: FieldType;
  /** How its values are selected, printed, carried in cursors and read from filters. */
  readonly value: ValueType;
  /** Whether it may hold NULL (a sort key that may is compared with expanded predicates: lib/pagination/keyset.ts). */
  readonly nullable: boolean;
  /** What the item selects: the column, or an expression of it (a timestamp's exact epoch seconds, timestampSelection, which items print in JS). */
  readonly selection: AnyPgColumn | SQL.Aliased;
}

/** Who reads a collection (docs/reference/collections-file.md, "Access"). */
export interface CollectionAccess {
  /** Whether clients without credentials read it, at the anonymous tier (never with row rules). */
  readonly anonymous: boolean;
  /** A client reads only the rows whose columns equal its claims, every rule at once; none: every row. */
  readonly rows: readonly RowRule[];
}

/** One column of a row rule, and the claim it must equal. */
export interface RowRule {
  /** The claim's path: ['tenant'] for `tenant`, ['app_metadata', 'tenant'] for `app_metadata.tenant`. */
  readonly claim: readonly string[];
  /** The column: its served field, or, when the column is not served, a field of its own named `@` and the column's name, which no parameter can name and no item shows. */
  readonly field: Field;
}

/** A collection as requests are served from it: built from a collections file resolved against the catalog (lib/pagination/runtime.ts). */
export interface Collection {
  readonly name: string;
  readonly table: PgTable;
  /** Item fields in JSON order. */
  readonly fields: ReadonlyMap<string, Field>;
  /** The fields that identify an item, the tie-breaker of every order and what cursors carry: NOT NULL and unique together. */
  readonly key: readonly string[];
  readonly variants: readonly VariantName[];
  readonly defaultVariant: VariantName;
  readonly filters: Readonly<Record<string, readonly FilterOp[]>>;
  readonly sortKeys: readonly string[];
  /** The default order without the key's fields that the tie-breaker appends anyway (`-createdAt` for `-createdAt,-id`). */
  readonly defaultSort: readonly SortKey[];
  /** The timestamp field the time variant pages over. */
  readonly timeField?: string;
  readonly pageSize: { readonly default: number; readonly max: number };
  readonly cost: CostRule;
  /**
   * The default count (no `count` parameter) is exact while the planner's estimate of the filtered set is
   * under this many rows, and the estimate from it on.
   */
  readonly countThreshold: number;
  /** What an item selects, field by field (Field.selection). */
  readonly selection: Record<string, AnyPgColumn | SQL.Aliased>;
  /** Who reads it, and which of its rows. */
  readonly access: CollectionAccess;
}

/** "name,-priceCents" to sort keys, without the id tie-breaker; no validation. */
export function splitSort(text: string): SortKey[] {
  return text.split(',').map((part) => ({ field: part.replace(/^-/, ''), descending: part.startsWith('-') }));
}

export type Registry = ReadonlyMap<string, Collection>;

export function createRegistry(collections: Collection[]): Registry {
  return new Map(collections.map((collection) => [collection.name, collection]));
}
