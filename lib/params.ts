// Strict parsing of a request's query string and of the values in it.
import { invalidParameter } from './errors.ts';

/** The query parameters of one request, each name present at most once, values decoded. */
export type QueryParams = ReadonlyMap<string, string>;

function decode(component: string, name: string): string {
  try {
    // "+ in a query means a space" (API.md).
    return decodeURIComponent(component.replace(/\+/g, ' '));
  } catch {
    throw invalidParameter(name, 'is not valid percent-encoding');
  }
}

/**
 * Parses a raw query string (without "?"). An empty value, a repeated name or bad
 * percent-encoding is a 400 naming the parameter; nothing is silently dropped.
 */
export function parseQueryString(raw: string): QueryParams {
  const params = new Map<string, string>();
  for (const piece of raw.split('&')) {
    if (piece === '') continue; // "a=1&&b=2" or a trailing "&": no parameter there
    const eq = piece.indexOf('=');
    const rawName = eq === -1 ? piece : piece.slice(0, eq);
    const name = decode(rawName, rawName);
    if (name === '') throw invalidParameter(rawName || '(empty name)', 'has no name');
    const value = eq === -1 ? '' : decode(piece.slice(eq + 1), name);
    if (params.has(name)) throw invalidParameter(name, 'must not be repeated');
    if (value === '') throw invalidParameter(name, 'must not be empty');
    // PostgreSQL text cannot hold NUL; refuse it here rather than fail in the database.
    if (value.includes('\u0000')) throw invalidParameter(name, 'must not contain a NUL character');
    params.set(name, value);
  }
  return params;
}

/** The raw query string of a URL, without "?" and without any fragment. */
export function rawQueryOf(url: string): string {
  const start = url.indexOf('?');
  if (start === -1) return '';
  const end = url.indexOf('#', start);
  return url.slice(start + 1, end === -1 ? undefined : end);
}

/** An integer written as plain decimal digits, within [min, max]. */
export function parseInteger(name: string, value: string, min: number, max: number): number {
  const reason = `must be an integer from ${min} to ${max}`;
  const negative = value.startsWith('-') && min < 0;
  const digits = negative ? value.slice(1) : value;
  if (!/^\d{1,20}$/.test(digits)) throw invalidParameter(name, reason);
  const number = Number(negative ? `-${digits}` : digits);
  if (!Number.isSafeInteger(number) || number < min || number > max) throw invalidParameter(name, reason);
  return number;
}

export const MAX_SAFE = Number.MAX_SAFE_INTEGER; // 2^53 - 1

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

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
  const year = Number(y), month = Number(mo), day = Number(d);
  if (
    year < 1 ||
    month < 1 || month > 12 ||
    day < 1 || day > daysInMonth(year, month) ||
    Number(h) > 23 || Number(mi) > 59 || Number(s) > 59 ||
    (!zulu && Number(om) > 59)
  ) {
    throw invalidParameter(name, reason);
  }
  // PostgreSQL holds UTC offsets up to ±15:59 and refuses the cast beyond (every real zone is within ±14:00).
  if (!zulu && Number(oh) > 15) throw invalidParameter(name, 'must have a UTC offset from -15:59 to +15:59');
  const offset = zulu ? '+00:00' : `${sign}${oh}:${om}`;
  return `${y}-${mo}-${d}T${h}:${mi}:${s}.${(fraction ?? '').padEnd(6, '0')}${offset}`;
}
