// The collection model: a collections file's entry resolved against the catalog, with everything it left unsaid derived.
import type { Column, Relation } from '../catalog/model.ts';
import type { ValueKind } from './kinds.ts';
import type { OrderKey } from './orders.ts';
import type { Operator, Variant } from './schema.ts';

export interface CollectionField {
  /** The name items and parameters use: the column's, or its camelCase. */
  readonly name: string;
  readonly column: Column;
  readonly kind: ValueKind;
}

export interface CollectionKey {
  readonly columns: readonly string[];
  /** Where it comes from: the primary key, a unique key over NOT NULL columns, or the file. */
  readonly source: 'primary key' | 'unique key' | 'file';
}

/** A sort a request may ask for, and the index that serves it (undefined: none, the file accepting it). */
export interface ServedOrder {
  readonly order: readonly OrderKey[];
  readonly index: string | undefined;
}

/** One column of a row rule and the claim it must equal (docs/reference/collections-file.md, "Access"). */
export interface RowRule {
  /** The column, served or not. */
  readonly column: Column;
  /** The claim's path: ['tenant'], or ['app_metadata', 'tenant'] for `app_metadata.tenant`. */
  readonly claim: readonly string[];
}

/** Who reads a collection, and which of its rows. */
export interface CollectionAccess {
  /** Whether clients without credentials read it: never when it has rows. */
  readonly anonymous: boolean;
  /** A client reads only the rows whose columns equal its claims, every rule at once; none: every row. */
  readonly rows: readonly RowRule[];
}

interface CostRuleSettings {
  readonly itemsPerUnit: number;
  readonly countedPerUnit: number;
  /** Rows an offset skips per unit along the index of each sort column that has one (lib/pagination's CostRule). */
  readonly indexed: Readonly<Record<string, number>>;
  /** Units a chunk costs when no index serves its order. */
  readonly unindexedSort: number;
}

export interface Collection {
  readonly name: string;
  readonly relation: Relation;
  /** In the order items show them. */
  readonly fields: readonly CollectionField[];
  /** Whether the file lists them; else they are every column of a supported type, and change with the table. */
  readonly columnsListed: boolean;
  readonly key: CollectionKey;
  readonly variants: readonly Variant[];
  readonly defaultVariant: Variant;
  readonly timeColumn?: string;
  /** Per column, the operators offered. */
  readonly filters: Readonly<Record<string, readonly Operator[]>>;
  /**
   * Per sort column: its order (ascending, then the key; a request may reverse it) and the index that serves it,
   * which, with row rules, leads with the rules' columns.
   */
  readonly sorts: Readonly<Record<string, ServedOrder>>;
  /** The default order, the key appended. */
  readonly order: ServedOrder;
  readonly unindexedSorts: boolean;
  readonly pageSize: { readonly default: number; readonly max: number };
  readonly countThreshold: number;
  readonly cost: CostRuleSettings;
  readonly access: CollectionAccess;
}
