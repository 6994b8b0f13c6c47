// Column types from pg_type rows: through domains to the base type, arrays to their element, typmods decoded.
import type { ColumnType, QualifiedName } from './model.ts';

/** A row of pg_type, as lib/catalog/read.ts selects it. */
export interface TypeRow {
  readonly oid: number;
  readonly schema: string;
  readonly name: string;
  readonly typtype: string;
  readonly category: string;
  /** A domain's underlying type (0 otherwise). */
  readonly basetype: number;
  /** The typmod a domain applies to its base type (-1 when none). */
  readonly typtypmod: number;
  /** An array's element type (0 otherwise; some fixed-length types such as `name` and `point` have one too). */
  readonly elem: number;
  /** A domain's NOT NULL. */
  readonly notnull: boolean;
}

/** The base type (oid and typmod) under a column's declared type, the domains passed through and whether one was NOT NULL. */
interface BaseOf {
  readonly oid: number;
  readonly typmod: number;
  readonly domains: readonly QualifiedName[];
  readonly notNull: boolean;
}

function baseOf(types: ReadonlyMap<number, TypeRow>, oid: number, typmod: number): BaseOf {
  const domains: QualifiedName[] = [];
  let notNull = false;
  let row = typeRow(types, oid);
  // A column of a domain type has atttypmod -1; the typmod on its base type is the domain's typtypmod.
  while (row.typtype === 'd') {
    domains.push({ schema: row.schema, name: row.name });
    notNull ||= row.notnull;
    if (row.typtypmod !== -1) typmod = row.typtypmod;
    row = typeRow(types, row.basetype);
  }
  return { oid: row.oid, typmod, domains, notNull };
}

/** The pairs (oid, typmod) whose format_type() a column type needs: its base and, for an array, its element's, in turn. */
export function formatsNeeded(types: ReadonlyMap<number, TypeRow>, oid: number, typmod: number): [number, number][] {
  const base = baseOf(types, oid, typmod);
  const row = typeRow(types, base.oid);
  const own: [number, number] = [base.oid, base.typmod];
  return isArray(row) ? [own, ...formatsNeeded(types, row.elem, base.typmod)] : [own];
}

/** The column type of a declared type, given pg_type's rows, the enums' labels and format_type() of each (oid, typmod). */
export function columnType(
  types: ReadonlyMap<number, TypeRow>,
  labels: ReadonlyMap<number, readonly string[]>,
  formatted: ReadonlyMap<string, string>,
  oid: number,
  typmod: number,
): ColumnType {
  const base = baseOf(types, oid, typmod);
  const row = typeRow(types, base.oid);
  const enumLabels = labels.get(base.oid);
  return {
    schema: row.schema,
    name: row.name,
    category: row.category,
    typtype: row.typtype,
    formatted: formatted.get(formatKey(base.oid, base.typmod)) ?? row.name,
    typmod: base.typmod,
    ...decodeTypmod(row.name, base.typmod),
    domains: base.domains,
    ...(row.typtype === 'e' ? { enumLabels: enumLabels ?? [] } : {}),
    // An array's typmod is its element's (numeric(5,2)[]).
    ...(isArray(row) ? { element: columnType(types, labels, formatted, row.elem, base.typmod) } : {}),
  };
}

export function formatKey(oid: number, typmod: number): string {
  return `${oid}:${typmod}`;
}

function isArray(row: TypeRow): boolean {
  return row.category === 'A' && row.elem !== 0;
}

function typeRow(types: ReadonlyMap<number, TypeRow>, oid: number): TypeRow {
  const row = types.get(oid);
  if (!row) throw new Error(`Catalog: type ${oid} was not read`);
  return row;
}

/** What a typmod encodes, by type (PostgreSQL's own encodings: numeric.c, varchar.c, timestamp.c). */
function decodeTypmod(name: string, typmod: number): { precision?: number; scale?: number; length?: number } {
  if (typmod < 0) return {};
  switch (name) {
    case 'numeric': {
      const packed = typmod - 4;
      // The scale is 11 bits, signed since PostgreSQL 15 (numeric(2,-3)).
      return { precision: (packed >> 16) & 0xffff, scale: ((packed & 0x7ff) ^ 1024) - 1024 };
    }
    case 'varchar':
    case 'bpchar':
      return { length: typmod - 4 };
    case 'bit':
    case 'varbit':
      return { length: typmod };
    case 'timestamp':
    case 'timestamptz':
    case 'time':
    case 'timetz':
      return { precision: typmod };
    case 'interval': {
      // The low 16 bits are the precision, 0xffff when only the fields (YEAR TO MONTH…) were given.
      const precision = typmod & 0xffff;
      return precision === 0xffff ? {} : { precision };
    }
    default:
      return {};
  }
}
