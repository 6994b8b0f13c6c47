// Strict parsing of a request's query string and of the values in it.

import { invalidParameter } from '../http/errors.ts';
import { remembered } from '../http/remembered.ts';
import { hasControlCharacter } from '../http/text.ts';
import { notAnIntegerIn } from './values.ts';
import { POSITION_PARAMS } from './variant-params.ts';

/** The query parameters of one request, each name present at most once, values decoded. */
export type QueryParams = ReadonlyMap<string, string>;

/** What a query component needs decoding for: a percent-escape or a "+". */
const ENCODED = /[%+]/;

function decode(component: string, name: string): string {
  // Most components (names, numbers, sort keys, cursors) are plain: nothing to decode, nothing to allocate.
  if (!ENCODED.test(component)) return component;
  try {
    // "+" in a query means a space (docs/reference/api.md, "Reading the query string").
    return decodeURIComponent(component.replace(/\+/g, ' '));
  } catch {
    throw invalidParameter(name, 'is not valid percent-encoding');
  }
}

// What one request may carry. Every link the service hands out repeats the request's filters, sort
// and count, and offset and page chunks send five links in the Link header: 1024 characters of them,
// as links write them, keep each link under 1.5 KiB and the Link header under 8 KiB (nginx and Apache
// refuse a header line or request line longer than 8 KiB; Node answers 431 past 16 KiB of headers).
// A cursor carries the same filters, base64url-encoded: under 2 KiB, so a followed link is too, and a
// query with a cursor and the filters beside it stays under MAX_QUERY_LENGTH.

/** The raw query string without its cursor: a cheap bound before anything is decoded. */
export const MAX_QUERY_LENGTH = 4096;
/** The filters, sort and count of a query (every parameter but the variant's own), as links write them. */
export const MAX_LINK_QUERY_LENGTH = 1024;

/** What a query component may hold as it is: encodeURIComponent's unreserved characters, and ",". */
const PLAIN_COMPONENT = /^[A-Za-z0-9\-_.!~*'(),]*$/;

/**
 * Leaves "," readable in links ("category[in]=a,b", "sort=-name,id"); everything else is percent-encoded,
 * "[" and "]" too (`category%5Bin%5D=a,b`): curl reads them as a glob, so a pasted link with them fails.
 */
export function encodeQueryComponent(text: string): string {
  // Most components (numbers, sort keys, cursors) need no encoding: a test spares the replace.
  if (PLAIN_COMPONENT.test(text)) return text;
  return encodeURIComponent(text).replace(/%2C/gi, ',');
}

/** A 400 for a query that is too long, naming its longest parameter: the one to shorten. */
function tooLong(pieces: readonly [name: string, length: number][], length: number, limit: number, what: string): never {
  const [name] = pieces.reduce((longest, piece) => (piece[1] > longest[1] ? piece : longest), ['(query)', -1]);
  throw invalidParameter(name, `makes ${what} ${length} characters long; at most ${limit} are allowed`);
}

/** A parameter name as read: decoded, and its length as links write it (undefined: links do not repeat it). */
interface ReadName {
  readonly name: string;
  readonly inLinks: number | undefined;
}

/**
 * A parameter's name as sent, read: decoded, or a 400 for an empty name or one with a control character. A
 * request's names are few and repeat from request to request (its values are what changes): each is read once,
 * and the last 1,024 are remembered.
 */
const readName = remembered(1024, (rawName: string): ReadName => {
  const name = decode(rawName, rawName);
  if (name === '') throw invalidParameter(rawName || '(empty name)', 'has no name');
  // Named as sent (percent-encoded), so that the problem names it in printable text.
  if (hasControlCharacter(name)) throw invalidParameter(rawName, 'must not contain a NUL or other control character in its name');
  return { name, inLinks: POSITION_PARAMS.has(name) ? undefined : encodeQueryComponent(name).length };
});

/**
 * Parses a raw query string (without "?"). An empty value, a repeated name, bad percent-encoding,
 * a control character or a query longer than the bounds above is a 400 naming the parameter;
 * nothing is silently dropped.
 */
export function parseQueryString(raw: string): QueryParams {
  if (raw.length > MAX_QUERY_LENGTH) {
    // A cursor is checked by its own rules (a 400 invalid_cursor); only the rest counts here.
    const pieces = raw
      .split('&')
      .filter((piece) => !piece.startsWith('cursor='))
      .map((piece): [string, number] => [piece.split('=')[0]!.slice(0, 100), piece.length]);
    const length = pieces.reduce((sum, [, n]) => sum + n + 1, -1);
    if (length > MAX_QUERY_LENGTH) tooLong(pieces, length, MAX_QUERY_LENGTH, 'the query string without its cursor');
  }
  const params = new Map<string, string>();
  let linkLength = -1;
  for (const piece of raw.split('&')) {
    if (piece === '') continue; // "a=1&&b=2" or a trailing "&": no parameter there
    const eq = piece.indexOf('=');
    const { name, inLinks } = readName(eq === -1 ? piece : piece.slice(0, eq));
    const value = eq === -1 ? '' : decode(piece.slice(eq + 1), name);
    if (params.has(name)) throw invalidParameter(name, 'must not be repeated');
    if (value === '') throw invalidParameter(name, 'must not be empty');
    // PostgreSQL text cannot hold NUL; other control characters would grow every cursor that
    // carries them six-fold (JSON escapes): refuse them here rather than fail later.
    if (hasControlCharacter(value)) throw invalidParameter(name, 'must not contain a NUL or other control character');
    params.set(name, value);
    if (inLinks !== undefined) linkLength += inLinks + 1 + encodeQueryComponent(value).length + 1;
  }
  if (linkLength > MAX_LINK_QUERY_LENGTH) {
    const pieces = [...params]
      .filter(([name]) => !POSITION_PARAMS.has(name))
      .map(([name, value]): [string, number] => [name, encodeQueryComponent(name).length + 1 + encodeQueryComponent(value).length]);
    tooLong(pieces, linkLength, MAX_LINK_QUERY_LENGTH, 'the filters, sort and count, as links write them,');
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
  const negative = value.startsWith('-') && min < 0;
  const digits = negative ? value.slice(1) : value;
  const number = /^\d{1,20}$/.test(digits) ? Number(negative ? `-${digits}` : digits) : Number.NaN;
  if (!Number.isSafeInteger(number) || number < min || number > max) throw notAnIntegerIn(name, min, max);
  return number;
}

export const MAX_SAFE = Number.MAX_SAFE_INTEGER; // 2^53 - 1

/**
 * A chunk's size (`limit` or `page-size`): the collection's default when absent, else 1 … its max. The one
 * parser of sizes, read by the variants that serve a chunk and by the cost rule that charges it.
 */
export function parseSize(
  params: QueryParams,
  name: 'limit' | 'page-size',
  pageSize: { readonly default: number; readonly max: number },
): number {
  const value = params.get(name);
  return value === undefined ? pageSize.default : parseInteger(name, value, 1, pageSize.max);
}
