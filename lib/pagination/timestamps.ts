// Timestamps, one home: RFC 3339 UTC with exactly six fractional digits in every item, cursor and link,
// exact to the microsecond: items read them from PostgreSQL as exact decimal seconds, which formatEpoch
// prints (db/timestamps.ts, below lib/ so that the seed prints its rows alike), and what RFC 3339 cannot write as
// PostgreSQL's own text; filters and positions go back as text that PostgreSQL casts, so no JS Date ever holds one.
import { type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { formatEpoch } from '../../db/timestamps.ts';
import { invalidParameter } from '../http/errors.ts';

/**
 * What an item selects for a timestamp of years 1 to 9999 (timestampSelection): its seconds since 1970-01-01T00:00:00Z as an exact decimal with six
 * fractional digits ("1735689600.123456", "-62135596800.000000"; PostgreSQL 14 and later), which formatEpoch
 * (db/timestamps.ts) prints. Unlike the timestamptz text, it does not depend on the session's TimeZone or DateStyle.
 */
function epochSeconds(column: AnyPgColumn | SQL): SQL<string> {
  return sql<string>`extract(epoch from ${column})`;
}

/**
 * A timestamp as it goes into SQL: the text (as parseTimestamp or formatEpoch write it), or the placeholder
 * of one, cast to timestamptz.
 */
export function timestampValue(text: string | Placeholder): SQL {
  return sql`${text}::timestamptz`;
}

/** How a timestamp RFC 3339 can write is printed (formatEpoch, timestampText): UTC, six fractional digits. */
export const PRINTED_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/**
 * What a timestamp RFC 3339 cannot write prints as, in items and cursors alike (docs/reference/api.md, "Values"): BC
 * with " BC" after the "Z", a year past 9999 with all its digits, and infinity, -infinity.
 */
export const PRINTED_EXCEPTION =
  /^(?:\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z BC|\d{5,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z|-?infinity)$/;

/**
 * What an item selects for a timestamptz: the exact epoch seconds (epochSeconds) from year 1 to 9999, which formatEpoch
 * prints; the rest printed by PostgreSQL as PRINTED_EXCEPTION says (extract(epoch …) is no longer exact near the end of
 * the type's range, past year 294246, and formatEpoch prints no other year). Two comparisons a row, beside the extract.
 */
export function timestampSelection(column: AnyPgColumn | SQL): SQL<string> {
  const format = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"';
  return sql<string>`(case when ${column} >= timestamptz '0001-01-01T00:00:00Z' and ${column} < timestamptz '10000-01-01T00:00:00Z' then ${epochSeconds(column)}::text when not isfinite(${column}) then ${column}::text when ${column} < timestamptz '0001-01-01T00:00:00Z' then to_char(${column} at time zone 'UTC', '${sql.raw(format)}" BC"') else to_char(${column} at time zone 'UTC', '${sql.raw(format)}') end)`;
}

/** An item's timestamptz from what timestampSelection selected: epoch seconds printed, or PostgreSQL's own text as it is. */
export function printTimestamp(raw: string): string {
  return formatEpoch(raw) ?? raw;
}

// Timestamps are carried as text (RFC 3339, six fractional digits, as formatEpoch prints them or as
// parseTimestamp normalises them; or as PRINTED_EXCEPTION) and compared in SQL after a cast, so no microsecond is lost.
const TIMESTAMP_TEXT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{6}(?:Z|[+-](\d{2}):(\d{2}))$/;
const EXCEPTION_TEXT = /^(\d{4,7})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{6}Z( BC)?$/;

/**
 * Whether a value read back from a cursor is a timestamp as this module writes them, and one PostgreSQL holds:
 * a cursor is signed, but what a cast refuses must not make a 500 even so.
 */
export function isTimestampText(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  if (value === 'infinity' || value === '-infinity') return true;
  const m = TIMESTAMP_TEXT.exec(value);
  if (m) {
    const [, y, mo, d, h, mi, s, oh, om] = m;
    return Number(y) >= 1 && heldDay(y!, mo!, d!, false, 9999) && validClock(h!, mi!, s!) && Number(oh ?? 0) <= 15 && Number(om ?? 0) <= 59;
  }
  const e = EXCEPTION_TEXT.exec(value);
  if (!e || (e[7] === undefined && e[1]!.length === 4)) return false;
  const [, y, mo, d, h, mi, s, bc] = e;
  return heldDay(y!, mo!, d!, bc !== undefined, LAST_YEAR.timestamp) && validClock(h!, mi!, s!);
}

function validClock(hour: string, minute: string, second: string): boolean {
  return Number(hour) <= 23 && Number(minute) <= 59 && Number(second) <= 59;
}

/** The last year of PostgreSQL's date, and of its timestamps (both start on 4714-11-24 BC). */
export const LAST_YEAR = { date: 5_874_897, timestamp: 294_276 } as const;

const isLeap = (year: number) => year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Whether a day as PostgreSQL prints it (the year's digits, BC or not) is one of the proleptic Gregorian calendar
 * that its date and timestamps hold: from 4714-11-24 BC (the Julian day 0) up to the end of `lastYear`. 1 BC is the
 * astronomical year 0, a leap year.
 */
export function heldDay(yearText: string, monthText: string, dayText: string, bc: boolean, lastYear: number): boolean {
  const printed = Number(yearText);
  const month = Number(monthText);
  const day = Number(dayText);
  if (printed < 1 || month < 1 || month > 12 || day < 1) return false;
  const year = bc ? 1 - printed : printed;
  if (day > (month === 2 && isLeap(year) ? 29 : MONTH_DAYS[month - 1]!)) return false;
  if (year < -4713 || (year === -4713 && (month < 11 || (month === 11 && day < 24)))) return false;
  return year <= lastYear;
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
