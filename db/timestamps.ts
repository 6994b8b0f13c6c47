// How an item's timestamp is printed: PostgreSQL's exact epoch seconds (extract(epoch …), which
// lib/pagination/timestamps.ts selects) as RFC 3339 UTC with six fractional digits. Here, below lib/, because
// the seed prints its rows' timestamps the way the service prints its items' (db/ never imports lib/); and
// timestampText, PostgreSQL's own printing of the same form, for the operator API (lib/ratelimit, which does
// not import lib/pagination).
import type { SQL } from 'drizzle-orm';
import { sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';

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
 * RFC 3339 UTC with exactly six fractional digits, formatted by PostgreSQL (no JS Date). The operator API's
 * few timestamps use it; collection items print theirs with formatEpoch, which costs PostgreSQL less.
 */
export function timestampText(column: AnyPgColumn | SQL): SQL {
  return sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}
