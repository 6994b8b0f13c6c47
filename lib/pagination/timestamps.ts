// Timestamps, one home: RFC 3339 UTC with exactly six fractional digits in every item, cursor and link,
// exact to the microsecond: items read them from PostgreSQL as exact decimal seconds and print them here;
// filters and positions go back as text that PostgreSQL casts, so no JS Date ever holds one.
import { type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { invalidParameter } from '../http/errors.ts';

/**
 * RFC 3339 UTC with exactly six fractional digits, formatted by PostgreSQL (no JS Date). The operator API's
 * few timestamps use it; collection items print theirs with formatEpoch, which costs PostgreSQL less.
 */
export function timestampText(column: AnyPgColumn | SQL): SQL {
  return sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

/**
 * What an item selects for a timestamp: its seconds since 1970-01-01T00:00:00Z as an exact decimal with six
 * fractional digits ("1735689600.123456", "-62135596800.000000"; PostgreSQL 14 and later), which formatEpoch
 * prints. Unlike the timestamptz text, it does not depend on the session's TimeZone or DateStyle.
 */
export function epochSeconds(column: AnyPgColumn | SQL): SQL<string> {
  return sql<string>`extract(epoch from ${column})`;
}

/**
 * Where formatEpoch writes: the separators in place, the digits written over at each call, then read out as
 * one string. Pieced together from strings, a timestamp made a dozen intermediate ones: 400 bytes an item.
 */
const PRINTED = Buffer.from('0000-00-00T00:00:00.000000Z', 'latin1');

/** Writes `value` as `digits` decimal digits into PRINTED from `at`. */
function put(at: number, value: number, digits: number): void {
  for (let i = at + digits - 1; i >= at; i--) {
    PRINTED[i] = 48 + (value % 10);
    value = (value / 10) | 0;
  }
}

/**
 * The value of the decimal digits of `text` from `start` to `end` (exclusive), or -1 if any is not a digit.
 * Read by character code: a chunk prints one timestamp per item, and a regular expression's match would
 * make an array and three strings for each, and what a request allocates is what its CPU follows
 * (docs/benchmarks.md).
 */
function digitsValue(text: string, start: number, end: number): number {
  let value = 0;
  for (let i = start; i < end; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/**
 * An instant, as epochSeconds selects it, printed as RFC 3339 UTC with six fractional digits, exactly (integer
 * arithmetic on the seconds and the microseconds). Undefined for what RFC 3339 cannot print (years before 1
 * or after 9999, ±infinity) and for text of any other form than `-?\d{1,12}\.\d{6}`: the caller decides what
 * that means.
 */
export function formatEpoch(text: string): string | undefined {
  const dot = text.length - 7;
  const negative = text.charCodeAt(0) === 45; /* - */
  const start = negative ? 1 : 0;
  if (dot - start < 1 || dot - start > 12 || text.charCodeAt(dot) !== 46 /* . */) return undefined;
  let seconds = digitsValue(text, start, dot);
  let micros = digitsValue(text, dot + 1, text.length);
  if (seconds < 0 || micros < 0) return undefined;
  if (negative) {
    // -12.250000 is 13 seconds before the epoch plus 750000 microseconds.
    seconds = -seconds;
    if (micros !== 0) {
      seconds -= 1;
      micros = 1_000_000 - micros;
    }
  }
  const days = Math.floor(seconds / 86_400);
  const second = seconds - days * 86_400;
  // The civil date of a day count (Howard Hinnant's civil_from_days), in the proleptic Gregorian calendar.
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  if (year < 1 || year > 9999) return undefined;
  const hour = Math.floor(second / 3600);
  const minute = Math.floor((second - hour * 3600) / 60);
  put(0, year, 4);
  put(5, month, 2);
  put(8, day, 2);
  put(11, hour, 2);
  put(14, minute, 2);
  put(17, second % 60, 2);
  put(20, micros, 6);
  return PRINTED.toString('latin1');
}

/**
 * A timestamp as it goes into SQL: the text (as parseTimestamp or formatEpoch write it), or the placeholder
 * of one, cast to timestamptz.
 */
export function timestampValue(text: string | Placeholder): SQL {
  return sql`${text}::timestamptz`;
}

/** How every timestamp is printed (formatEpoch, timestampText): UTC, six fractional digits. */
export const PRINTED_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

// Timestamps are carried as text (RFC 3339, six fractional digits, as formatEpoch prints them or as
// parseTimestamp normalises them) and compared in SQL after a cast, so no microsecond is lost.
const TIMESTAMP_TEXT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(?:Z|[+-]\d{2}:\d{2})$/;

/** Whether a value read back from a cursor is a timestamp as this module writes them. */
export function isTimestampText(value: unknown): value is string {
  return typeof value === 'string' && TIMESTAMP_TEXT.test(value);
}

/** What parseTimestamp reads (the OpenAPI document gives it as the pattern of `before`, `after` and timestamp filters). */
export const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * An RFC 3339 timestamp with up to six fractional digits, checked field by field, returned
 * in a form PostgreSQL reads as timestamptz exactly (microseconds kept, no JS Date involved).
 */
export function parseTimestamp(name: string, value: string): string {
  const reason = 'must be an RFC 3339 timestamp with at most six fractional digits, e.g. 2026-11-21T10:00:00.123456Z';
  const m = RFC3339.exec(value);
  if (!m) throw invalidParameter(name, reason);
  const [, y, mo, d, h, mi, s, fraction, zulu, sign, oh, om] = m;
  const year = Number(y),
    month = Number(mo),
    day = Number(d);
  if (
    year < 1 ||
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth(year, month) ||
    Number(h) > 23 ||
    Number(mi) > 59 ||
    Number(s) > 59 ||
    (!zulu && Number(om) > 59)
  ) {
    throw invalidParameter(name, reason);
  }
  // PostgreSQL holds UTC offsets up to ±15:59 and refuses the cast beyond (every real zone is within ±14:00).
  if (!zulu && Number(oh) > 15) throw invalidParameter(name, 'must have a UTC offset from -15:59 to +15:59');
  const offset = zulu ? '+00:00' : `${sign}${oh}:${om}`;
  return `${y}-${mo}-${d}T${h}:${mi}:${s}.${(fraction ?? '').padEnd(6, '0')}${offset}`;
}
