// Timestamps, one home: RFC 3339 UTC with exactly six fractional digits in every item, cursor and link,
// exact to the microsecond: items read them from PostgreSQL as exact decimal seconds, which formatEpoch
// prints (db/timestamps.ts, below lib/ so that the seed prints its rows alike); filters and positions go back as text that PostgreSQL casts, so no JS Date ever holds one.
import { type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import { invalidParameter } from '../http/errors.ts';

/**
 * What an item selects for a timestamp: its seconds since 1970-01-01T00:00:00Z as an exact decimal with six
 * fractional digits ("1735689600.123456", "-62135596800.000000"; PostgreSQL 14 and later), which formatEpoch
 * (db/timestamps.ts) prints. Unlike the timestamptz text, it does not depend on the session's TimeZone or DateStyle.
 */
export function epochSeconds(column: AnyPgColumn | SQL): SQL<string> {
  return sql<string>`extract(epoch from ${column})`;
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
