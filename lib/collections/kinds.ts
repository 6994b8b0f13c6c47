// What the service makes of each column type: its kind, whether it is served by default, sorts, keys, and its operators.
import type { ColumnType } from '../catalog/model.ts';
import type { Operator } from './schema.ts';

export type ValueKind =
  | 'integer'
  | 'decimal'
  | 'text'
  | 'uuid'
  | 'boolean'
  | 'date'
  | 'timestamp'
  | 'timestamptz'
  | 'time'
  | 'interval'
  | 'enum'
  | 'json'
  | 'array'
  | 'tsvector'
  | 'bytea';

const BY_NAME: Readonly<Record<string, ValueKind>> = {
  int2: 'integer',
  int4: 'integer',
  int8: 'integer',
  numeric: 'decimal',
  float4: 'decimal',
  float8: 'decimal',
  text: 'text',
  varchar: 'text',
  bpchar: 'text',
  citext: 'text',
  uuid: 'uuid',
  bool: 'boolean',
  date: 'date',
  timestamp: 'timestamp',
  timestamptz: 'timestamptz',
  time: 'time',
  timetz: 'time',
  interval: 'interval',
  json: 'json',
  jsonb: 'json',
  tsvector: 'tsvector',
  bytea: 'bytea',
};

/** The kind of a column's (base) type; undefined for a type the service does not serve (point, inet, a range, a composite…). */
export function valueKind(type: ColumnType): ValueKind | undefined {
  if (type.typtype === 'e') return 'enum';
  if (type.element) {
    const element = valueKind(type.element);
    return element === undefined || element === 'bytea' ? undefined : 'array';
  }
  // pg_catalog's types by name; citext is an extension's, in whatever schema it was installed.
  return type.schema === 'pg_catalog' || type.name === 'citext' ? BY_NAME[type.name] : undefined;
}

/** Served when the file lists no columns: every kind but bytea, which is served only where the file names it. */
export function servedByDefault(kind: ValueKind | undefined): kind is ValueKind {
  return kind !== undefined && kind !== 'bytea';
}

const COMPARED: readonly Operator[] = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'isnull'];
const OPERATORS: Readonly<Record<ValueKind, readonly Operator[]>> = {
  integer: COMPARED,
  decimal: COMPARED,
  date: COMPARED,
  timestamp: COMPARED,
  timestamptz: COMPARED,
  time: COMPARED,
  interval: COMPARED,
  text: [...COMPARED, 'prefix'],
  uuid: ['eq', 'ne', 'in', 'isnull'],
  enum: ['eq', 'ne', 'in', 'isnull'],
  boolean: ['eq', 'ne', 'isnull'],
  // A whole document, array or text-search vector equal to a value is no question anyone asks of a collection.
  json: [],
  array: [],
  tsvector: [],
  bytea: [],
};

/** The operators that mean something for a kind: none for json, arrays, tsvector and bytea; prefix only on text. */
export function operatorsFor(kind: ValueKind): readonly Operator[] {
  return OPERATORS[kind];
}

/** Whether a column of the kind can be a sort key or part of the key: a btree order that a cursor can carry exactly. */
export function sortable(kind: ValueKind): boolean {
  return !['json', 'array', 'tsvector', 'bytea'].includes(kind);
}

/**
 * Whether a row rule's column can be of the type: one a claim (a JSON string or number) can equal exactly, as an
 * `eq` filter's value does: text, an integer, a numeric, a uuid, an enum. Not a float, whose equality is
 * inexact, nor booleans, times, documents or arrays, which identify no one.
 */
export function equalsClaim(type: ColumnType): boolean {
  const kind = valueKind(type);
  if (kind === 'decimal') return type.name === 'numeric';
  return kind !== undefined && ['integer', 'text', 'uuid', 'enum'].includes(kind);
}
