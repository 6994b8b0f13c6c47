// The one reader of PostgreSQL's catalog: relations, columns, types, keys and btree indexes, from pg_catalog in one snapshot.
import type { Sql, TransactionSql } from 'postgres';
import type { CatalogModel, Column, Index, IndexColumn, Key, QualifiedName, Relation, RelationKind } from './model.ts';
import { columnType, formatKey, formatsNeeded, type TypeRow } from './types.ts';

export interface ReadCatalogOptions {
  /** The schemas to read, named exactly; undefined: every schema but PostgreSQL's own and the service's. */
  readonly schemas?: readonly string[];
  /** The service's own schema (its limiter, keys and tiers), never read as the team's data. */
  readonly serviceSchema: string;
}

/** Schemas that are PostgreSQL's own: never read, even when asked for. */
const SYSTEM_SCHEMAS = ['pg_catalog', 'information_schema'];
const KINDS: Readonly<Record<string, RelationKind>> = { r: 'table', v: 'view', m: 'materialized view', p: 'partitioned table' };

interface RelationRow {
  oid: number;
  schema: string;
  name: string;
  relkind: string;
  populated: boolean;
  estimate: number | null;
  parent_schema: string | null;
  parent_name: string | null;
}

interface ColumnRow {
  rel: number;
  name: string;
  attnum: number;
  typid: number;
  typmod: number;
  notnull: boolean;
  selectable: boolean;
}

interface IndexRow {
  rel: number;
  name: string;
  unique: boolean;
  primary: boolean;
  partial: boolean;
  constraint: string | null;
  keys: { attnum: number; option: number; definition: string; orders: boolean }[];
}

/**
 * Reads the catalog of the schemas asked for, in one read-only repeatable-read transaction so that every
 * query sees the same snapshot. It reads pg_catalog, not information_schema, which leaves out what the
 * connecting role may not use: a column the role cannot SELECT is read, and marked.
 */
export async function readCatalog(sql: Sql, options: ReadCatalogOptions): Promise<CatalogModel> {
  return sql.begin('isolation level repeatable read read only', (tx) => readIn(tx, options));
}

async function readIn(tx: TransactionSql, { schemas, serviceSchema }: ReadCatalogOptions): Promise<CatalogModel> {
  const excluded = [...SYSTEM_SCHEMAS, serviceSchema];
  const relations = await tx<RelationRow[]>`
    select c.oid, n.nspname as schema, c.relname as name, c.relkind, c.relispopulated as populated,
      case
        when c.relkind = 'p' then (
          select sum(leaf.reltuples)::float8 from pg_partition_tree(c.oid) tree join pg_class leaf on leaf.oid = tree.relid
          where tree.isleaf and leaf.reltuples >= 0)
        when c.relkind in ('r', 'm') and c.reltuples >= 0 then c.reltuples::float8
      end as estimate,
      pn.nspname as parent_schema, pc.relname as parent_name
    from pg_class c
    join pg_namespace n on n.oid = c.relnamespace
    left join pg_inherits i on c.relispartition and i.inhrelid = c.oid
    left join pg_class pc on pc.oid = i.inhparent
    left join pg_namespace pn on pn.oid = pc.relnamespace
    where c.relkind in ('r', 'v', 'm', 'p')
      and n.nspname <> all(${excluded}::text[])
      and n.nspname !~ '^pg_(toast|temp_)'
      and (${schemas === undefined} or n.nspname = any(${schemas ?? []}::text[]))
    order by n.nspname, c.relname`;
  const oids = relations.map((relation) => relation.oid);
  // Sent together, in two waves of one round trip each (postgres.js pipelines the statements of a transaction
  // that are asked for at once): a reading under load waits for as few turns of the server as it can.
  const [columns, types, indexes, primaryKeys] = await Promise.all([
    tx<ColumnRow[]>`
    select a.attrelid as rel, a.attname as name, a.attnum, a.atttypid as typid, a.atttypmod as typmod, a.attnotnull as notnull,
      has_schema_privilege(c.relnamespace, 'USAGE') and has_column_privilege(a.attrelid, a.attnum, 'SELECT') as selectable
    from pg_attribute a join pg_class c on c.oid = a.attrelid
    where a.attrelid = any(${oids}::oid[]) and a.attnum > 0 and not a.attisdropped
    order by a.attrelid, a.attnum`,
    // The types the columns use, and the types those are built on (a domain's base, an array's element), in turn.
    tx<TypeRow[]>`
    with recursive needed(oid) as (
      select distinct atttypid from pg_attribute where attrelid = any(${oids}::oid[]) and attnum > 0 and not attisdropped
      union
      select under.oid from needed join pg_type t on t.oid = needed.oid,
        lateral (values (t.typbasetype), (t.typelem)) as under(oid)
      where under.oid <> 0
    )
    select t.oid, n.nspname as schema, t.typname as name, t.typtype, t.typcategory as category, t.typbasetype as basetype,
      t.typtypmod, t.typelem as elem, t.typnotnull as notnull
    from pg_type t join pg_namespace n on n.oid = t.typnamespace
    where t.oid in (select oid from needed)`,
    tx<IndexRow[]>`
    select i.indrelid as rel, x.relname as name, i.indisunique as unique, i.indisprimary as primary, i.indpred is not null as partial,
      con.conname as constraint,
      (select json_agg(json_build_object(
          'attnum', k.attnum, 'option', k.opt, 'definition', pg_get_indexdef(i.indexrelid, k.n::int, true),
          'orders', coalesce(oc.opcdefault, false) and k.coll in (0, coalesce(a.attcollation, 0))) order by k.n)
        from unnest(i.indkey::int2[], i.indoption::int2[], i.indclass::oid[], i.indcollation::oid[])
          with ordinality as k(attnum, opt, cls, coll, n)
        left join pg_opclass oc on oc.oid = k.cls
        left join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum and k.attnum <> 0
        where k.n <= i.indnkeyatts) as keys
    from pg_index i
    join pg_class x on x.oid = i.indexrelid
    join pg_am am on am.oid = x.relam
    left join pg_constraint con on con.conindid = i.indexrelid and con.conrelid = i.indrelid and con.contype in ('p', 'u')
    where i.indrelid = any(${oids}::oid[]) and am.amname = 'btree' and i.indisvalid and i.indislive
    order by i.indrelid, x.relname`,
    tx<{ rel: number; name: string; keys: number[] }[]>`
    select conrelid as rel, conname as name, conkey as keys from pg_constraint where conrelid = any(${oids}::oid[]) and contype = 'p'`,
  ]);
  const typeMap = new Map(types.map((row) => [row.oid, row]));
  const enumOids = types.filter((row) => row.typtype === 'e').map((row) => row.oid);
  const pairs = columns.flatMap((column) => formatsNeeded(typeMap, column.typid, column.typmod));
  const [labels, formatted] = await Promise.all([
    tx<{ type: number; label: string }[]>`
    select enumtypid as type, enumlabel as label from pg_enum where enumtypid = any(${enumOids}::oid[]) order by enumtypid, enumsortorder`,
    tx<{ type: number; typmod: number; formatted: string }[]>`
    select type, typmod, format_type(type, nullif(typmod, -1)) as formatted
    from unnest(${pairs.map(([type]) => type)}::oid[], ${pairs.map(([, typmod]) => typmod)}::int4[]) as pair(type, typmod)`,
  ]);

  const formats = new Map(formatted.map((row) => [formatKey(row.type, row.typmod), row.formatted]));
  const labelMap = new Map([...groupBy(labels, (row) => row.type)].map(([type, rows]) => [type, rows.map((row) => row.label)]));
  const columnsOf = groupBy(columns, (row) => row.rel);
  const indexesOf = groupBy(indexes, (row) => row.rel);
  return {
    relations: relations.map((row): Relation => {
      const rowColumns = columnsOf.get(row.oid) ?? [];
      const model: Column[] = rowColumns.map((column) => {
        const type = columnType(typeMap, labelMap, formats, column.typid, column.typmod);
        const domainNotNull = column.typid !== 0 && notNullDomain(typeMap, column.typid);
        return {
          name: column.name,
          attnum: column.attnum,
          type,
          nullable: !(column.notnull || domainNotNull),
          selectable: column.selectable,
        };
      });
      const byAttnum = new Map(model.map((column) => [column.attnum, column]));
      const primary = primaryKeys.find((key) => key.rel === row.oid);
      const relationIndexes = (indexesOf.get(row.oid) ?? []).map((index) => indexModel(index, byAttnum));
      const partitionOf: QualifiedName | undefined =
        row.parent_schema !== null && row.parent_name !== null ? { schema: row.parent_schema, name: row.parent_name } : undefined;
      return {
        oid: row.oid,
        schema: row.schema,
        name: row.name,
        kind: KINDS[row.relkind]!,
        ...(partitionOf ? { partitionOf } : {}),
        columns: model,
        ...(primary ? { primaryKey: { name: primary.name, columns: primary.keys.map((attnum) => byAttnum.get(attnum)!.name) } } : {}),
        uniqueKeys: uniqueKeys(indexesOf.get(row.oid) ?? [], relationIndexes, byAttnum),
        indexes: relationIndexes,
        estimatedRows: row.estimate ?? undefined,
        populated: row.populated,
      };
    }),
  };
}

function notNullDomain(types: ReadonlyMap<number, TypeRow>, oid: number): boolean {
  for (let row = types.get(oid); row?.typtype === 'd'; row = types.get(row.basetype)) if (row.notnull) return true;
  return false;
}

function indexModel(row: IndexRow, columns: ReadonlyMap<number, Column>): Index {
  const indexColumns = row.keys.map((key): IndexColumn => {
    // indoption's bits: 1 DESC, 2 NULLS FIRST (pg_index.h).
    const descending = (key.option & 1) !== 0;
    const nullsFirst = (key.option & 2) !== 0;
    const column = key.attnum === 0 ? undefined : columns.get(key.attnum)?.name;
    if (column === undefined) return { column: undefined, expression: key.definition, descending, nullsFirst, ordersAsColumn: false };
    return { column, descending, nullsFirst, ordersAsColumn: key.orders };
  });
  const usable = !row.partial && indexColumns.every((column) => column.column !== undefined && column.ordersAsColumn);
  return { name: row.name, unique: row.unique, primary: row.primary, partial: row.partial, columns: indexColumns, usable };
}

/** Unique indexes (and so unique constraints) on NOT NULL columns only, whole and without expressions, the primary key aside. */
function uniqueKeys(rows: readonly IndexRow[], indexes: readonly Index[], columns: ReadonlyMap<number, Column>): Key[] {
  const keys: Key[] = [];
  rows.forEach((row, at) => {
    const index = indexes[at]!;
    if (!index.unique || index.primary || index.partial) return;
    const names = row.keys.map((key) => columns.get(key.attnum));
    if (names.some((column) => column === undefined || column.nullable)) return;
    keys.push({ name: row.constraint ?? row.name, columns: names.map((column) => column!.name) });
  });
  return keys;
}

function groupBy<T>(rows: readonly T[], keyOf: (row: T) => number): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const row of rows) {
    const group = groups.get(keyOf(row));
    if (group) group.push(row);
    else groups.set(keyOf(row), [row]);
  }
  return groups;
}
