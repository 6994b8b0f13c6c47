// Filters: `{field}` and `{field}[{op}]` parameters, parsed against the registry and turned into SQL.
import { and, eq, gt, gte, inArray, like, lt, lte, ne, type SQL } from 'drizzle-orm';
import { invalidParameter } from '../http/errors.ts';
import { parseInteger, type QueryParams } from './params.ts';
import type { Collection, Field, FilterOp } from './registry.ts';
import { parseTimestamp, timestampValue } from './timestamps.ts';

export interface Filter {
  readonly field: string;
  readonly op: FilterOp;
  /** Normalised values: one, or several for `in`. */
  readonly values: readonly string[];
}

const FILTER_NAME = /^([A-Za-z][A-Za-z0-9]*)(?:\[([a-z]+)\])?$/;
/** The most values one `in` filter takes: more would be a long query for one filter (see MAX_LINK_QUERY_LENGTH). */
export const MAX_IN_VALUES = 100;
const MAX_TEXT_LENGTH = 1000;
const INT4 = 2 ** 31;

/** True when the parameter name has the shape of a filter on one of the collection's fields. */
export function isFilterName(collection: Collection, name: string): boolean {
  const m = FILTER_NAME.exec(name);
  return m !== null && m[1] !== undefined && collection.filters[m[1]] !== undefined;
}

function parseValue(name: string, field: Field, value: string): string {
  switch (field.type) {
    case 'integer':
      return String(parseInteger(name, value, -INT4, INT4 - 1));
    case 'bigint':
      return String(parseInteger(name, value, -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
    case 'timestamp':
      return parseTimestamp(name, value);
    case 'text':
      if (value.length > MAX_TEXT_LENGTH) throw invalidParameter(name, `must be at most ${MAX_TEXT_LENGTH} characters`);
      return value;
  }
}

/** The filters of a request; names that are not filters are left to the caller. */
export function parseFilters(collection: Collection, params: QueryParams): Filter[] {
  const filters: Filter[] = [];
  for (const [name, value] of params) {
    const m = FILTER_NAME.exec(name);
    const fieldName = m?.[1];
    if (!m || fieldName === undefined) continue;
    const ops = collection.filters[fieldName];
    const field = collection.fields.get(fieldName);
    if (!ops || !field) continue;
    const op = (m[2] ?? 'eq') as FilterOp;
    if (!ops.includes(op)) {
      const offered = ops.map((o) => (o === 'eq' ? `${fieldName}=` : `${fieldName}[${o}]=`)).join(', ');
      throw invalidParameter(name, `is not a supported filter; ${fieldName} takes ${offered}`);
    }
    if (op === 'in') {
      const parts = value.split(',');
      if (parts.length > MAX_IN_VALUES) throw invalidParameter(name, `takes at most ${MAX_IN_VALUES} values`);
      if (parts.some((part) => part === '')) throw invalidParameter(name, 'must be a comma list without empty values');
      const values = [...new Set(parts.map((part) => parseValue(name, field, part)))].sort();
      filters.push({ field: fieldName, op, values });
    } else {
      filters.push({ field: fieldName, op, values: [parseValue(name, field, value)] });
    }
  }
  // A canonical order, so equal filter sets compare equal (cursors bind to them).
  return filters.sort((a, b) => (a.field + a.op < b.field + b.op ? -1 : a.field + a.op > b.field + b.op ? 1 : 0));
}

/** The query parameter that expresses a filter, as it goes into links. */
export function filterParam(filter: Filter): [string, string] {
  return [filter.op === 'eq' ? filter.field : `${filter.field}[${filter.op}]`, filter.values.join(',')];
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (ch) => `\\${ch}`);
}

function condition(collection: Collection, filter: Filter): SQL {
  const field = collection.fields.get(filter.field)!;
  const column = field.column;
  const value = (v: string): unknown => (field.type === 'timestamp' ? timestampValue(v) : field.type === 'text' ? v : Number(v));
  const first = filter.values[0]!;
  switch (filter.op) {
    case 'eq':
      return eq(column, value(first));
    case 'ne':
      return ne(column, value(first));
    case 'lt':
      return lt(column, value(first));
    case 'lte':
      return lte(column, value(first));
    case 'gt':
      return gt(column, value(first));
    case 'gte':
      return gte(column, value(first));
    case 'in':
      return inArray(column, filter.values.map(value));
    case 'prefix':
      return like(column, `${escapeLike(first)}%`);
  }
}

/** The WHERE condition of the filters; undefined when there are none. */
export function filterCondition(collection: Collection, filters: readonly Filter[]): SQL | undefined {
  return and(...filters.map((filter) => condition(collection, filter)));
}
