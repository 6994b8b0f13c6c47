// How a field's values travel (docs/reference/api.md, "Values"): what an item selects and prints, what a cursor carries, how a
// filter value is read and bound, from the column's type in the catalog (lib/pagination/runtime.ts), printed exactly:
// never through a lossy JS number or a JS Date.
// What the OpenAPI document says of them comes from here too: the type's facts, the forms printed and accepted.
import { type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { type ColumnType, qualifiedName } from '../catalog/model.ts';
import type { ValueKind } from '../collections/kinds.ts';
import { type ApiError, invalidParameter } from '../http/errors.ts';
import { heldDay, isTimestampText, LAST_YEAR, parseTimestamp, printTimestamp, timestampSelection, timestampValue } from './timestamps.ts';

/** What a field is, as the OpenAPI document describes it. integer: int4; int8: exact, never a JS number; timestamp: timestamptz. */
export type FieldType =
  | 'integer'
  | 'text'
  | 'timestamp'
  | 'smallint'
  | 'int8'
  | 'decimal'
  | 'float'
  | 'boolean'
  | 'uuid'
  | 'enum'
  | 'date'
  | 'localTimestamp'
  | 'time'
  | 'interval'
  | 'json'
  | 'array'
  | 'tsvector'
  | 'bytea';

/** One value of a cursor's position (null aside): a number for int2/int4 (and the demo's ids in its earlier cursors), text for the rest, or a boolean. */
export type KeyValue = string | number | boolean;

export interface ValueType {
  readonly type: FieldType;
  /** What an item selects for the column, under the field's name: the column, or an expression of it. */
  select(column: AnyPgColumn | SQL, name: string): AnyPgColumn | SQL.Aliased;
  /** The item's value of what the selection returns (never null). Absent: as it comes. */
  readonly print?: (raw: unknown) => unknown;
  /** The cursor's value of an item's printed value (never null). Absent: the value itself. */
  readonly position?: (printed: unknown) => KeyValue;
  /** Whether a value read back from a cursor (never null) is one this type writes. */
  isPosition(value: unknown): boolean;
  /** A value, or its placeholder, as SQL compares it with the column. */
  literal(value: KeyValue | Placeholder): SQL;
  /** The SQL type of the array an `in` filter's values are sent as. */
  readonly arrayType: string;
  /** A value as a request sends it (filter, since_id, before/after): normalised text, or a 400 naming `name`. */
  parse(name: string, text: string): string;
  /** The parameter, and the position value, of normalised text. */
  bind(text: string): KeyValue;
  /** An integer type's range: since_id takes it, from 0, when it is the whole key. */
  readonly integer?: { readonly min: bigint; readonly max: bigint };
  /** What the catalog says of the column's type: the OpenAPI document reads it. */
  readonly facts: TypeFacts;
  /**
   * The schema of the type's comparison operators, quoted, when they are an extension's (citext's): a filter and a
   * cursor's position compare with them by name, `operator("ext".=)`, as ORDER BY does through the type's operator
   * class. Unqualified, `=` on a citext installed off the search path is text's: case-sensitive, while the order is
   * not, and a walk would skip rows.
   */
  readonly operatorSchema?: string;
}

/** A comparison operator of a value type, qualified where its type's operators are an extension's. */
export function operatorOf(value: Pick<ValueType, 'operatorSchema'>, op: '=' | '<>' | '<' | '<=' | '>' | '>=' | '~~'): SQL {
  return sql.raw(value.operatorSchema === undefined ? op : `operator(${value.operatorSchema}.${op})`);
}

/**
 * A column's type as the OpenAPI document describes it (lib/openapi/schemas.ts), as data: lib/openapi reads the
 * catalog only through this, and the printed forms through PRINTED and ACCEPTED below.
 */
export interface TypeFacts {
  /** The base type's pg_type.typname: int4, numeric, bpchar, timetz, jsonb, an enum's name, _int4. */
  readonly name: string;
  /** format_type() of the base type with its typmod: numeric(7,2), character(4), team.mood, integer[]. */
  readonly sqlType: string;
  /** The domains the column's type goes through to its base, outermost first, schema-qualified. */
  readonly domains: readonly string[];
  /** An enum's labels, in their order. */
  readonly labels?: readonly string[];
  /** The declared length of varchar(n) and char(n). */
  readonly length?: number;
  /** numeric(p,s)'s precision and scale. */
  readonly precision?: number;
  readonly scale?: number;
  /**
   * An array's element: its field type and facts, and whether a multi-dimensional array prints its rows as arrays
   * (to_json's nesting) or is flattened (elements printed one by one in SQL: dates, times, intervals, tsvector).
   */
  readonly element?: { readonly type: FieldType; readonly facts: TypeFacts; readonly nested: boolean };
}

/**
 * An integer written as plain decimal digits (a `-` where the range has negatives), within [min, max], as normalised
 * text; anything else a 400 saying the range, the one wording of every integer parameter (docs/reference/api.md, "Parameters").
 */
export function integerText(name: string, text: string, min: bigint, max: bigint): string {
  if (!(min < 0n ? /^-?\d{1,20}$/ : /^\d{1,20}$/).test(text)) throw notAnIntegerIn(name, min, max);
  const value = BigInt(text);
  if (value < min || value > max) throw notAnIntegerIn(name, min, max);
  return String(value);
}

/** The 400 of an integer parameter that is not one within [min, max]: the one wording of every integer parameter. */
export function notAnIntegerIn(name: string, min: number | bigint, max: number | bigint): ApiError {
  return invalidParameter(name, `must be an integer from ${min} to ${max}`);
}

function integerParser(min: bigint, max: bigint): (name: string, text: string) => string {
  return (name, text) => integerText(name, text, min, max);
}
/** The longest value a text filter takes. */
export const MAX_TEXT_LENGTH = 1000;

const same = (column: AnyPgColumn | SQL): AnyPgColumn | SQL.Aliased => column as AnyPgColumn;

function parseText(name: string, value: string): string {
  if (value.length > MAX_TEXT_LENGTH) throw invalidParameter(name, `must be at most ${MAX_TEXT_LENGTH} characters`);
  // The query string refuses control characters (lib/pagination/params.ts); a cursor's filters come this way too.
  if (value.includes('\0')) throw invalidParameter(name, 'must not contain a NUL: PostgreSQL text cannot hold one');
  return value;
}

/** A text key value from a cursor: any string PostgreSQL text can hold. */
const isText = (value: unknown): value is string => typeof value === 'string' && !value.includes('\0');

// ---- Exact printing.

const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
const parseWithSource = JSON.parse as (
  text: string,
  reviver: (key: string, value: unknown, context: { source?: string }) => unknown,
) => unknown;

/** A JSON number from PostgreSQL's own text, written as it is. */
function exactNumber(text: string): unknown {
  return rawJson(text);
}

/**
 * An int8 from PostgreSQL's text: a number when it is one exactly (JSON writes it as the same digits, and a
 * small one costs no object), else the text as a JSON number.
 */
function printInt8(raw: unknown): unknown {
  const value = Number(raw);
  return Number.isSafeInteger(value) ? value : exactNumber(raw as string);
}

/** JSON text (json, jsonb, an array as to_json writes it) with every number written as the text has it. */
function exactJson(text: unknown): unknown {
  return parseWithSource(text as string, (_key, value, context) =>
    typeof value === 'number' && context.source !== undefined ? rawJson(context.source) : value,
  );
}

/** An exact number's text back from its printed value (a safe integer, JSON.rawJSON's object, or a string for NaN and infinities). */
function numberText(printed: unknown): string {
  if (typeof printed === 'string') return printed;
  // An int8 that is a safe integer is printed as a number (printInt8): its digits are the text.
  return typeof printed === 'number' ? String(printed) : (printed as { rawJSON: string }).rawJSON;
}

/** numeric::text and float8::text: finite ones as JSON numbers from their text, NaN and ±Infinity as strings. */
function printNumber(raw: unknown): unknown {
  const text = raw as string;
  return text === 'NaN' || text.endsWith('Infinity') ? text : exactNumber(text);
}

// ---- Parsing what a request sends.

/**
 * The forms a request's values take, by type (the parsers below check ranges beyond them: a day in its month, an
 * hour up to 24); the OpenAPI document's parameters say them (lib/openapi/parameters.ts).
 */
export const ACCEPTED = {
  decimal: /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,4})?$/,
  uuid: /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
  date: /^(\d{4})-(\d{2})-(\d{2})$/,
  localTimestamp: /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$/,
  time: /^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?$/,
  /** A timetz's offset, after its time. */
  zone: /^(?:[Zz]|[+-](\d{2})(?::?(\d{2}))?)$/,
  /** ISO 8601 durations as PostgreSQL reads them, each part signed and of at most 7 digits (so never out of range). */
  interval:
    /^P(?=-?\d)(?:-?\d{1,7}Y)?(?:-?\d{1,7}M)?(?:-?\d{1,7}W)?(?:-?\d{1,7}D)?(?:T(?=-?\d)(?:-?\d{1,7}H)?(?:-?\d{1,7}M)?(?:-?\d{1,7}(?:\.\d{1,6})?S)?)?$/,
} as const;
const SPECIAL_NUMBERS = new Set(['NaN', 'Infinity', '-Infinity']);

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function validDate(y: string, m: string, d: string): boolean {
  const year = Number(y);
  const month = Number(m);
  const day = Number(d);
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month);
}

function validTime(h: string, m: string, s: string | undefined, allow24: boolean, fraction = ''): boolean {
  const hour = Number(h);
  // 24:00:00 is the end of a day for time and timetz; 24:00:00.5 is no time at all (PostgreSQL: out of range).
  const rest = Number(m) + Number(s ?? 0) + Number(`0.${fraction}0`);
  return Number(m) <= 59 && Number(s ?? 0) <= 59 && (hour <= 23 || (allow24 && hour === 24 && rest === 0));
}

function numberParser(name: string, text: string): string {
  if (text.length > MAX_TEXT_LENGTH || !(ACCEPTED.decimal.test(text) || SPECIAL_NUMBERS.has(text))) {
    throw invalidParameter(name, 'must be a decimal number (digits, an optional sign, fraction and exponent), NaN, Infinity or -Infinity');
  }
  return text;
}

/**
 * real and double precision as PostgreSQL reads them (float4in, float8in): a number that rounds past the largest
 * finite value is out of range, and so is a nonzero one that rounds to 0; one that rounds to a denormal is kept.
 * JS rounds decimal text to a double as strtod does; Math.fround after it can round a value a hair inside real's
 * range out of it (twice rounded), never one outside into it, so no value PostgreSQL refuses is let through.
 */
const FLOATS = {
  float4: { name: 'real', round: Math.fround, smallest: '1.4e-45', largest: '3.4028235e+38' },
  float8: { name: 'double precision', round: (value: number) => value, smallest: '4.9e-324', largest: '1.7976931348623157e+308' },
} as const;
type FloatName = keyof typeof FLOATS;

/** Whether decimal text (as ACCEPTED.decimal or NUMBER_TEXT takes it, or NaN, ±Infinity) is a value of the float type. */
function inFloatRange(float: FloatName, text: string): boolean {
  if (SPECIAL_NUMBERS.has(text)) return true;
  const value = FLOATS[float].round(Number(text));
  if (!Number.isFinite(value)) return false;
  // 0 only from a zero: 0e-400 is 0, 1e-400 underflows.
  return value !== 0 || !/[1-9]/.test(text.replace(/[eE].*$/, ''));
}

function floatParser(float: FloatName): (name: string, text: string) => string {
  const { name: type, smallest, largest } = FLOATS[float];
  return (name, text) => {
    const value = numberParser(name, text);
    if (!inFloatRange(float, value)) {
      throw invalidParameter(
        name,
        `must be within the range of ${type}: a magnitude from ${smallest} to ${largest}, 0, NaN, Infinity or -Infinity`,
      );
    }
    return value;
  };
}

// ---- Runtime value types, from the catalog's column type.

/** A type's name as SQL casts to it: schema-qualified, quoted, without its typmod (so that a cast never truncates). */
function castName(type: ColumnType): string {
  const quote = (part: string) => `"${part.replaceAll('"', '""')}"`;
  return `${quote(type.schema)}.${quote(type.name)}`;
}

/** What every runtime type shares: a cast of each value to the column's type, and its array for `in`. */
function castTo(type: ColumnType): Pick<ValueType, 'literal' | 'arrayType'> {
  const name = castName(type);
  return { literal: (value) => sql`${value}::${sql.raw(name)}`, arrayType: `${name}[]` };
}

const asText = (column: AnyPgColumn | SQL, name: string) => sql`${column}::text`.as(name);

/**
 * date, as 'YYYY-MM-DD' (a BC date with ' BC', ±infinity as 'infinity'), whatever the session's DateStyle. to_char
 * reads a date as a timestamp, which ends with 294276: the days after it, to 5874897-12-31, are written from extract.
 */
function dateText(column: AnyPgColumn | SQL): SQL {
  const part = (field: string) => sql`lpad(extract(${sql.raw(field)} from ${column})::text, 2, '0')`;
  return sql`(case when not isfinite(${column}) then ${column}::text when ${column} < date '0001-01-01' then to_char(${column}, 'YYYY-MM-DD" BC"') when ${column} > date '294276-12-31' then format('%s-%s-%s', extract(year from ${column}), ${part('month')}, ${part('day')}) else to_char(${column}, 'YYYY-MM-DD') end)`;
}

/** timestamp without time zone, as 'YYYY-MM-DDTHH:MM:SS.ffffff' (BC with ' BC', ±infinity as text). */
function localTimestampText(column: AnyPgColumn | SQL): SQL {
  const format = 'YYYY-MM-DD"T"HH24:MI:SS.US';
  return sql`(case when not isfinite(${column}) then ${column}::text when ${column} < timestamp '0001-01-01' then to_char(${column}, '${sql.raw(format)}" BC"') else to_char(${column}, '${sql.raw(format)}') end)`;
}

/** timestamptz in SQL alone (array elements): RFC 3339 UTC, six digits, as items print it. */
function utcTimestampText(column: AnyPgColumn | SQL): SQL {
  const format = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';
  return sql`(case when not isfinite(${column}) then ${column}::text when ${column} < timestamptz '0001-01-01Z' then to_char(${column} at time zone 'UTC', '${sql.raw(format)}" BC"') else to_char(${column} at time zone 'UTC', '${sql.raw(format)}') end)`;
}

/**
 * interval as an ISO 8601 duration with every part, seconds with six digits: P1Y2M-3DT4H5M6.789000S; `infinity` and
 * `-infinity` (PostgreSQL 17 on) as they are, which have no parts; NULL as NULL (format() would write its NULL
 * arguments as nothing: PYMDTHMS).
 */
function intervalText(column: AnyPgColumn | SQL): SQL {
  const part = (field: string) => sql`extract(${sql.raw(field)} from ${column})`;
  return sql`(case when not isfinite(${column}) then ${column}::text when ${column} is not null then format('P%sY%sM%sDT%sH%sM%sS', ${part('year')}, ${part('month')}, ${part('day')}, ${part('hour')}, ${part('minute')}, ${part('second')}) end)`;
}

/** What each runtime type prints, as the OpenAPI document's item schemas say (lib/openapi/schemas.ts). */
export const PRINTED = {
  date: /^(?:\d{4,}-\d{2}-\d{2}(?: BC)?|-?infinity)$/,
  localTimestamp: /^(?:\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(?: BC)?|-?infinity)$/,
  time: /^\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?$/,
  timetz: /^\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?[+-]\d{2}(?::\d{2}){0,2}$/,
  interval: /^(?:P-?\d+Y-?\d+M-?\d+DT-?\d+H-?\d+M-?\d+\.\d{6}S|-?infinity)$/,
} as const;
// PostgreSQL writes numeric without an exponent, and floats with at most three of its digits.
const NUMBER_TEXT = /^(?:-?\d+(?:\.\d+)?(?:e[+-]\d{1,3})?|NaN|-?Infinity)$/;

// Dates, timestamps, times and intervals read back from a cursor: as PRINTED writes them, and values PostgreSQL holds
// (a cursor is signed, but what a cast refuses must not make a 500 even so).
const DATE_POSITION = /^(\d{4,7})-(\d{2})-(\d{2})( BC)?$/;
const LOCAL_TIMESTAMP_POSITION = /^(\d{4,6})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{6}( BC)?$/;
const TIME_POSITION = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([+-])(\d{2})(?::(\d{2}))?(?::(\d{2}))?)?$/;
const INTERVAL_POSITION = /^P(-?\d{1,10})Y(-?\d{1,10})M(-?\d{1,10})DT(-?\d{1,10})H(-?\d{1,10})M(-?\d{1,12})\.(\d{6})S$/;

function isDatePosition(value: unknown): boolean {
  if (value === 'infinity' || value === '-infinity') return true;
  const m = isString(value) ? DATE_POSITION.exec(value) : null;
  return m !== null && heldDay(m[1]!, m[2]!, m[3]!, m[4] !== undefined, LAST_YEAR.date);
}

function isLocalTimestampPosition(value: unknown): boolean {
  if (value === 'infinity' || value === '-infinity') return true;
  const m = isString(value) ? LOCAL_TIMESTAMP_POSITION.exec(value) : null;
  return m !== null && heldDay(m[1]!, m[2]!, m[3]!, m[7] !== undefined, LAST_YEAR.timestamp) && validTime(m[4]!, m[5]!, m[6], false);
}

function isTimePosition(value: unknown, zoned: boolean): boolean {
  const m = isString(value) ? TIME_POSITION.exec(value) : null;
  if (m === null || zoned !== (m[5] !== undefined) || !validTime(m[1]!, m[2]!, m[3], true, m[4])) return false;
  // timetz holds offsets up to 15:59:59.
  return !zoned || (Number(m[6]) <= 15 && Number(m[7] ?? 0) <= 59 && Number(m[8] ?? 0) <= 59);
}

const INT32 = 2n ** 31n;
const INT64 = 2n ** 63n;

/** An interval as intervalText prints it, within what PostgreSQL holds: months and days in 32 bits, the time in 64 bits of microseconds. */
function isIntervalPosition(value: unknown): boolean {
  if (value === 'infinity' || value === '-infinity') return true;
  const m = isString(value) ? INTERVAL_POSITION.exec(value) : null;
  if (m === null) return false;
  const [years, months, days, hours, minutes, seconds] = m.slice(1, 7).map((part) => BigInt(part));
  const fraction = BigInt(m[7]!) * (m[6]!.startsWith('-') ? -1n : 1n);
  const month = years! * 12n + months!;
  const micros = ((hours! * 60n + minutes!) * 60n + seconds!) * 1_000_000n + fraction;
  return month >= -INT32 && month < INT32 && days! >= -INT32 && days! < INT32 && micros >= -INT64 && micros < INT64;
}

const isString = (value: unknown): value is string => typeof value === 'string';
const noFilter = (name: string): never => {
  throw invalidParameter(name, 'takes no filter');
};

/** The SQL an array element is printed with where to_json would print it otherwise than a field of its type. */
function elementText(kind: ValueKind | undefined): ((element: SQL) => SQL) | undefined {
  switch (kind) {
    case 'date':
      return dateText;
    case 'timestamp':
      return localTimestampText;
    case 'timestamptz':
      return utcTimestampText;
    case 'interval':
      return intervalText;
    case 'time':
    case 'tsvector':
      return (element) => sql`${element}::text`;
    default:
      return undefined;
  }
}

/**
 * The value type of a column of a runtime collection, by its kind (lib/collections/kinds.ts) and its type, with the
 * catalog's facts about the type for the OpenAPI document.
 */
export function runtimeValueType(kind: ValueKind, type: ColumnType, elementKind?: ValueKind): ValueType {
  return { ...valueTypeOf(kind, type, elementKind), facts: factsOf(type, elementKind) };
}

function factsOf(type: ColumnType, elementKind: ValueKind | undefined): TypeFacts {
  const { name, formatted: sqlType, enumLabels: labels, length, precision, scale } = type;
  const element =
    type.element && elementKind
      ? {
          type: valueTypeOf(elementKind, type.element).type,
          facts: factsOf(type.element, undefined),
          // Elements printed one by one are unnested, which flattens the array; the others are to_json's.
          nested: elementText(elementKind) === undefined,
        }
      : undefined;
  return {
    name,
    sqlType,
    domains: type.domains.map(qualifiedName),
    ...(labels ? { labels } : {}),
    ...(length !== undefined && (name === 'varchar' || name === 'bpchar') ? { length } : {}),
    ...(name === 'numeric' && precision !== undefined ? { precision, scale: scale ?? 0 } : {}),
    ...(element ? { element } : {}),
  };
}

function valueTypeOf(kind: ValueKind, type: ColumnType, elementKind?: ValueKind): Omit<ValueType, 'facts'> {
  const cast = castTo(type);
  const text = (parse: ValueType['parse'], isPosition: ValueType['isPosition'], select: ValueType['select'] = asText) => ({
    ...cast,
    select,
    isPosition,
    parse,
    bind: (value: string) => value,
  });
  switch (kind) {
    case 'integer': {
      if (type.name === 'int8') {
        const range = { min: -(2n ** 63n), max: 2n ** 63n - 1n };
        const parse = integerParser(range.min, range.max);
        return {
          ...text(
            parse,
            // A number too: the demo's cursors carried its ids so before it was served from its file (docs/reference/api.md, "Values").
            (value) =>
              Number.isSafeInteger(value) ||
              (isString(value) &&
                /^-?\d{1,19}$/.test(value) &&
                BigInt(value) >= -(2n ** 63n) &&
                BigInt(value) < 2n ** 63n &&
                String(BigInt(value)) === value),
          ),
          type: 'int8',
          print: printInt8,
          position: numberText,
          integer: range,
        };
      }
      const bits = type.name === 'int2' ? 15 : 31;
      const [min, max] = [-(2 ** bits), 2 ** bits - 1];
      return {
        ...cast,
        type: bits === 15 ? 'smallint' : 'integer',
        select: same,
        isPosition: (value) => Number.isSafeInteger(value) && (value as number) >= min && (value as number) <= max,
        parse: integerParser(BigInt(min), BigInt(max)),
        bind: Number,
        integer: { min: BigInt(min), max: BigInt(max) },
      };
    }
    case 'decimal': {
      // numeric holds every value ACCEPTED.decimal writes (exponents of 4 digits, 1000 characters): it compares them
      // exactly, 1e400 a number like any other. real and double precision refuse what they cannot hold.
      const float = type.name === 'numeric' ? undefined : (type.name as FloatName);
      return {
        ...text(
          float === undefined ? numberParser : floatParser(float),
          (value) => isString(value) && NUMBER_TEXT.test(value) && (float === undefined || inFloatRange(float, value)),
        ),
        type: float === undefined ? 'decimal' : 'float',
        print: printNumber,
        position: numberText,
      };
    }
    case 'text':
      return {
        ...text(parseText, isText, same),
        type: 'text',
        ...(type.schema === 'pg_catalog' ? {} : { operatorSchema: `"${type.schema.replaceAll('"', '""')}"` }),
      };
    case 'uuid':
      return {
        ...text(
          (name, value) => {
            if (!ACCEPTED.uuid.test(value)) throw invalidParameter(name, 'must be a UUID, e.g. 123e4567-e89b-12d3-a456-426614174000');
            return value.toLowerCase();
          },
          (value) => isString(value) && ACCEPTED.uuid.test(value),
          same,
        ),
        type: 'uuid',
      };
    case 'boolean':
      return {
        ...cast,
        type: 'boolean',
        select: same,
        isPosition: (value) => typeof value === 'boolean',
        parse: (name, value) => {
          if (value !== 'true' && value !== 'false') throw invalidParameter(name, 'must be true or false');
          return value;
        },
        bind: (value) => value === 'true',
      };
    case 'enum': {
      const labels = type.enumLabels ?? [];
      const listed = labels.length <= 20 ? labels.join(', ') : `${labels.slice(0, 20).join(', ')}, …`;
      return {
        ...text(
          (name, value) => {
            if (!labels.includes(value)) throw invalidParameter(name, `must be one of ${listed}`);
            return value;
          },
          (value) => isString(value) && labels.includes(value),
          same,
        ),
        type: 'enum',
      };
    }
    case 'date':
      return {
        ...text(
          (name, value) => {
            const m = ACCEPTED.date.exec(value);
            if (!m || !validDate(m[1]!, m[2]!, m[3]!)) throw invalidParameter(name, 'must be a date, YYYY-MM-DD');
            return value;
          },
          isDatePosition,
          (column, name) => dateText(column).as(name),
        ),
        type: 'date',
      };
    case 'timestamp':
      return {
        ...text(
          (name, value) => {
            const m = ACCEPTED.localTimestamp.exec(value);
            if (!m || !validDate(m[1]!, m[2]!, m[3]!) || !validTime(m[4]!, m[5]!, m[6], false)) {
              throw invalidParameter(name, 'must be a timestamp without time zone, YYYY-MM-DDTHH:MM:SS with at most six fractional digits');
            }
            return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${(m[7] ?? '').padEnd(6, '0')}`;
          },
          isLocalTimestampPosition,
          (column, name) => localTimestampText(column).as(name),
        ),
        type: 'localTimestamp',
      };
    case 'timestamptz':
      return {
        type: 'timestamp',
        // Exact epoch seconds, printed in JS (formatEpoch); what RFC 3339 cannot write, printed by PostgreSQL.
        select: (column, name) => timestampSelection(column).as(name),
        print: (raw) => printTimestamp(raw as string),
        isPosition: isTimestampText,
        literal: (value) => timestampValue(value as string | Placeholder),
        arrayType: 'timestamptz[]',
        parse: parseTimestamp,
        bind: (text) => text,
      };
    case 'time': {
      const zoned = type.name === 'timetz';
      return {
        ...text(
          (name, value) => {
            const reason = zoned
              ? 'must be a time with a UTC offset, HH:MM[:SS[.ffffff]] then Z or ±HH[:MM]'
              : 'must be a time, HH:MM[:SS[.ffffff]]';
            const zoneAt = zoned ? value.search(/[Zz+-]/) : -1;
            const m = ACCEPTED.time.exec(zoneAt === -1 ? value : value.slice(0, zoneAt));
            const zone = zoneAt === -1 ? undefined : ACCEPTED.zone.exec(value.slice(zoneAt));
            if (!m || !validTime(m[1]!, m[2]!, m[3], true, m[4]) || zoned !== (zone !== undefined) || zone === null) {
              throw invalidParameter(name, reason);
            }
            if (zone && (Number(zone[1] ?? 0) > 15 || Number(zone[2] ?? 0) > 59)) throw invalidParameter(name, reason);
            return value;
          },
          (value) => isTimePosition(value, zoned),
        ),
        type: 'time',
      };
    }
    case 'interval':
      return {
        ...text(
          (name, value) => {
            if (!ACCEPTED.interval.test(value)) throw invalidParameter(name, 'must be an ISO 8601 duration, e.g. P1Y2M3DT4H5M6.5S');
            return value;
          },
          isIntervalPosition,
          (column, name) => intervalText(column).as(name),
        ),
        type: 'interval',
      };
    case 'json':
      return { ...text(noFilter, () => false), type: 'json', print: exactJson };
    case 'array': {
      const element = elementText(elementKind);
      const select = element
        ? (column: AnyPgColumn | SQL, name: string) =>
            sql`(case when ${column} is null then null else coalesce((select json_agg(to_json(${element(sql`u.e`)}) order by u.n) from unnest(${column}) with ordinality as u(e, n)), '[]')::text end)`.as(
              name,
            )
        : (column: AnyPgColumn | SQL, name: string) => sql`to_json(${column})::text`.as(name);
      return { ...text(noFilter, () => false, select), type: 'array', print: exactJson };
    }
    case 'tsvector':
      return { ...text(noFilter, () => false), type: 'tsvector' };
    case 'bytea':
      return {
        ...text(
          noFilter,
          () => false,
          (column, name) => sql`'\\x' || encode(${column}, 'hex')`.as(name),
        ),
        type: 'bytea',
      };
  }
}
