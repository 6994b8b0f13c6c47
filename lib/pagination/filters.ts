// Filters: `{field}` and `{field}[{op}]` parameters, parsed against the registry and turned into SQL.
import { and, eq, gt, gte, isNotNull, isNull, like, lt, lte, ne, type Placeholder, type SQL, sql } from 'drizzle-orm';
import { invalidParameter } from '../http/errors.ts';
import { remembered } from '../http/remembered.ts';
import type { QueryParams } from './params.ts';
import type { Collection, Field, FilterOp } from './registry.ts';

import { operatorOf } from './values.ts';

export { MAX_TEXT_LENGTH } from './values.ts';

export interface Filter {
  readonly field: string;
  readonly op: FilterOp;
  /** Normalised values: one, or several for `in`. */
  readonly values: readonly string[];
  /**
   * Set on the filters of a row rule (lib/pagination/access.ts), which the client did not send and cannot
   * lift: the digest of the client's rows, which its cursors carry instead of the filters (keyset.ts).
   */
  readonly rows?: string;
}

/** `field` or `field[op]`; a field is named as lib/collections' FIELD_NAME allows (snake_case, digits). */
const FILTER_NAME = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[([a-z]+)\])?$/;
/** The most values one `in` filter takes: more would be a long query for one filter (see MAX_LINK_QUERY_LENGTH). */
export const MAX_IN_VALUES = 100;

/** A parameter name read as a filter's: its field, and its operator as written (undefined: `eq`). */
type FilterNameParts = readonly [field: string, op: string | undefined];

/**
 * What a parameter name names, null for a name that is not a filter's shape. A request's names are few and
 * repeat from request to request: each is matched once, and the last 1,024 are remembered.
 */
const filterNameParts = remembered(1024, (name: string): FilterNameParts | null => {
  const m = FILTER_NAME.exec(name);
  return m === null || m[1] === undefined ? null : [m[1], m[2]];
});

/** True when the parameter name has the shape of a filter on one of the collection's fields. */
export function isFilterName(collection: Collection, name: string): boolean {
  const parts = filterNameParts(name);
  return parts !== null && collection.filters[parts[0]] !== undefined;
}

function parseValue(name: string, field: Field, op: FilterOp, value: string): string {
  if (op === 'isnull') {
    if (value !== 'true' && value !== 'false') throw invalidParameter(name, 'must be true or false');
    return value;
  }
  return field.value.parse(name, value);
}

/** The filters of a request; names that are not filters are left to the caller. */
export function parseFilters(collection: Collection, params: QueryParams): Filter[] {
  const filters: Filter[] = [];
  for (const [name, value] of params) {
    const parts = filterNameParts(name);
    if (parts === null) continue;
    const [fieldName, written] = parts;
    const ops = collection.filters[fieldName];
    const field = collection.fields.get(fieldName);
    if (!ops || !field) continue;
    const op = (written ?? 'eq') as FilterOp;
    if (!ops.includes(op)) {
      const offered = ops.map((o) => (o === 'eq' ? `${fieldName}=` : `${fieldName}[${o}]=`)).join(', ');
      throw invalidParameter(name, `is not a supported filter; ${fieldName} takes ${offered}`);
    }
    if (op === 'in') {
      const parts = value.split(',');
      if (parts.length > MAX_IN_VALUES) throw invalidParameter(name, `takes at most ${MAX_IN_VALUES} values`);
      if (parts.some((part) => part === '')) throw invalidParameter(name, 'must be a comma list without empty values');
      const values = [...new Set(parts.map((part) => parseValue(name, field, op, part)))].sort();
      filters.push({ field: fieldName, op, values });
    } else {
      filters.push({ field: fieldName, op, values: [parseValue(name, field, op, value)] });
    }
  }
  // A canonical order, so equal filter sets compare equal (cursors bind to them).
  return filters.sort(byFilterOrder);
}

/** The canonical order of filters: by field, then operator. */
export function byFilterOrder(a: Filter, b: Filter): number {
  const left = a.field + a.op;
  const right = b.field + b.op;
  return left < right ? -1 : left > right ? 1 : 0;
}

/** The field a filter compares: one of the items', or a row rule's column that items do not show. */
function filteredField(collection: Collection, filter: Filter): Field {
  return collection.fields.get(filter.field) ?? collection.access.rows.find((rule) => rule.field.name === filter.field)!.field;
}

/** The query parameter that expresses a filter, as it goes into links. */
export function filterParam(filter: Filter): [string, string] {
  return [filter.op === 'eq' ? filter.field : `${filter.field}[${filter.op}]`, filter.values.join(',')];
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (ch) => `\\${ch}`);
}

/** The placeholder of the `at`-th filter's value (filters in canonical order). */
function filterSlot(at: number): Placeholder {
  return sql.placeholder(`f${at}`);
}

/** The SQL operator of each comparing filter. */
const OPERATORS = { eq: '=', ne: '<>', lt: '<', lte: '<=', gt: '>', gte: '>=', in: '=', prefix: '~~' } as const;

function condition(collection: Collection, filter: Filter, at: number): SQL {
  const field = filteredField(collection, filter);
  const column = field.column;
  const slot = filterSlot(at);
  const value = field.value.literal(slot);
  if (field.value.operatorSchema !== undefined && filter.op !== 'isnull') {
    // An extension's type (citext): its own operators, named with their schema (lib/pagination/values.ts, operatorOf).
    const op = operatorOf(field.value, OPERATORS[filter.op]);
    if (filter.op === 'in') return sql`${column} ${op} any(${slot}::${sql.raw(field.value.arrayType)})`;
    return sql`${column} ${op} ${filter.op === 'prefix' ? slot : value}`;
  }
  switch (filter.op) {
    case 'eq':
      return eq(column, value);
    case 'ne':
      return ne(column, value);
    case 'lt':
      return lt(column, value);
    case 'lte':
      return lte(column, value);
    case 'gt':
      return gt(column, value);
    case 'gte':
      return gte(column, value);
    case 'in':
      // One array parameter, so the number of values does not make another shape.
      return sql`${column} = any(${slot}::${sql.raw(field.value.arrayType)})`;
    case 'prefix':
      return like(column, slot);
    case 'isnull':
      // The value is part of the shape (filtersKey): no placeholder.
      return filter.values[0] === 'true' ? isNull(column) : isNotNull(column);
  }
}

/**
 * The WHERE condition of the filters, with a placeholder for each filter's value (filterValues gives them);
 * undefined when there are none. It depends on the filters' fields and operators only, not on their values.
 */
export function filterCondition(collection: Collection, filters: readonly Filter[]): SQL | undefined {
  return and(...filters.map((filter, at) => condition(collection, filter, at)));
}

/** What a filter's operators and fields make of a query's shape (its values aside). */
export function filtersKey(filters: readonly Filter[]): string {
  let key = '';
  for (const filter of filters)
    key += filter.op === 'isnull' ? `${filter.field}[isnull=${filter.values[0]}]` : `${filter.field}[${filter.op}]`;
  return key;
}

/** An element of a PostgreSQL array literal, always quoted, so no value is read as NULL or splits the list. */
function arrayElement(value: string): string {
  return `"${value.replace(/[\\"]/g, (ch) => `\\${ch}`)}"`;
}

/** The values of filterCondition's placeholders. */
export function filterValues(collection: Collection, filters: readonly Filter[], into: Record<string, unknown>): void {
  filters.forEach((filter, at) => {
    const field = filteredField(collection, filter);
    const first = filter.values[0]!;
    let value: unknown;
    if (filter.op === 'isnull') return;
    if (filter.op === 'in') value = `{${filter.values.map(arrayElement).join(',')}}`;
    else if (filter.op === 'prefix') value = `${escapeLike(first)}%`;
    else value = field.value.bind(first);
    into[`f${at}`] = value;
  });
}
