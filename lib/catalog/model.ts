// The catalog model: the relations, columns, types, keys and indexes of a database, as lib/catalog/read.ts reads them.

/** A schema-qualified name, each part exactly as in the catalog (any case, never folded). */
export interface QualifiedName {
  readonly schema: string;
  readonly name: string;
}

/** pg_class.relkind r, v, m and p. */
export type RelationKind = 'table' | 'view' | 'materialized view' | 'partitioned table';

/**
 * A column's type, resolved through domains to its base type. `typmod` and what it encodes (precision,
 * scale, length) are the base type's as the column uses it: the column's own, or its domain's.
 */
export interface ColumnType {
  readonly schema: string;
  /** The base type's pg_type.typname: int4, numeric, varchar, timestamptz, an enum's name, _int4 for int4[]. */
  readonly name: string;
  /** pg_type.typcategory: N numeric, S string, D date/time, B boolean, E enum, A array, U user-defined, … */
  readonly category: string;
  /** pg_type.typtype of the base: b base, e enum, c composite, r range, m multirange, p pseudo. */
  readonly typtype: string;
  /** format_type() of the base with its typmod: numeric(10,2), character varying(40), integer[]. */
  readonly formatted: string;
  /** -1 when none. */
  readonly typmod: number;
  /** numeric's precision and scale; the fractional digits of timestamp, time and interval. */
  readonly precision?: number;
  readonly scale?: number;
  /** The declared length of varchar, char, bit. */
  readonly length?: number;
  /** The domains the column's declared type went through to reach the base, outermost first. */
  readonly domains: readonly QualifiedName[];
  /** An enum's labels in their order. */
  readonly enumLabels?: readonly string[];
  /** An array's element type (resolved in turn, with the array's typmod). */
  readonly element?: ColumnType;
}

export interface Column {
  /** pg_attribute.attname, exactly. */
  readonly name: string;
  readonly attnum: number;
  readonly type: ColumnType;
  /** False under NOT NULL, on the column or on one of its domains. A view's columns are always nullable here. */
  readonly nullable: boolean;
  /** Whether the connecting role may SELECT it: USAGE on the schema and has_column_privilege(…, 'SELECT'). */
  readonly selectable: boolean;
}

/** A set of columns no two rows share, none of them NULL. */
export interface Key {
  /** The constraint's or the unique index's name. */
  readonly name: string;
  readonly columns: readonly string[];
}

export interface IndexColumn {
  /** The column, or undefined for an expression (then `expression` is its text). */
  readonly column: string | undefined;
  readonly expression?: string;
  readonly descending: boolean;
  readonly nullsFirst: boolean;
  /**
   * Whether the index orders the column as ORDER BY does: its operator class is the type's default and its
   * collation the column's (a text_pattern_ops or COLLATE "C" index on a column of another collation does not).
   */
  readonly ordersAsColumn: boolean;
}

/** A valid btree index (other access methods serve no ORDER BY and are left out). */
export interface Index {
  readonly name: string;
  readonly unique: boolean;
  readonly primary: boolean;
  /** Has a WHERE clause: it holds only some rows, so serves no order over the whole relation. */
  readonly partial: boolean;
  /** Its key columns in order; INCLUDE columns are left out. */
  readonly columns: readonly IndexColumn[];
  /** Whether it can serve an order: not partial, and every key column a column ordered as the column is. */
  readonly usable: boolean;
}

export interface Relation extends QualifiedName {
  readonly oid: number;
  readonly kind: RelationKind;
  /** The partitioned table a partition belongs to: such a relation is served through its parent, never listed itself. */
  readonly partitionOf?: QualifiedName;
  /** In attnum order, dropped ones left out. */
  readonly columns: readonly Column[];
  readonly primaryKey?: Key;
  /** Unique constraints and unique indexes over NOT NULL columns only, neither partial nor on expressions, besides the primary key. */
  readonly uniqueKeys: readonly Key[];
  readonly indexes: readonly Index[];
  /**
   * pg_class.reltuples (for a partitioned table, the sum over its leaf partitions): the planner's estimate
   * of its rows; undefined when never vacuumed or analyzed, and for a view.
   */
  readonly estimatedRows: number | undefined;
  /**
   * pg_class.relispopulated: false for a materialized view made or refreshed WITH NO DATA, which every SELECT
   * refuses until REFRESH MATERIALIZED VIEW; true for every other relation.
   */
  readonly populated: boolean;
}

export interface CatalogModel {
  /** Every relation of the schemas read, partitions included (marked by `partitionOf`), ordered by schema and name. */
  readonly relations: readonly Relation[];
}

/** The relations a file may serve and `init` lists: every one but partitions, which their parent serves. */
export function listedRelations(model: CatalogModel): Relation[] {
  return model.relations.filter((relation) => relation.partitionOf === undefined);
}

/** The relation of exactly this schema and name, partitions included. */
export function findRelation(model: CatalogModel, name: QualifiedName): Relation | undefined {
  return model.relations.find((relation) => relation.schema === name.schema && relation.name === name.name);
}
/** `schema.name` as files and messages write it: each part double-quoted unless lower-case letters, digits and underscores. */
export function qualifiedName(name: QualifiedName): string {
  return `${quoteIdentifier(name.schema)}.${quoteIdentifier(name.name)}`;
}

/** Bare when lower-case letters, digits and underscores (not checked against SQL's keywords: for display), double-quoted otherwise. */
function quoteIdentifier(identifier: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(identifier) ? identifier : `"${identifier.replaceAll('"', '""')}"`;
}
