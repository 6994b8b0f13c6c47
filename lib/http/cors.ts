// Cross-origin reads from browser pages (docs/reference/api.md, "CORS"): preflights answered at once, answers readable.
import type { MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import type { HeaderRecord } from './header-record.ts';

/** The headers a page may read: the pagination and rate-limit ones GitHub exposes, and ours. */
const EXPOSED_HEADERS = [
  'Link',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'ETag',
  'X-Request-Id',
];

/** What a page may send beyond the CORS-safelisted headers: a key, and a tag for a conditional request. */
const ALLOWED_HEADERS = ['Authorization', 'If-None-Match'];

/** Every method some path takes (docs/reference/api.md, "URLs"). */
const ALLOWED_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** How long a browser may keep a preflight's answer: Chromium caps it at two hours. */
const PREFLIGHT_MAX_AGE_SECONDS = 7200;

/**
 * What CORS adds to every answer, and its preflights. `origins`: `*` (any page; the API is read-only for
 * anonymous clients and keys are bearer tokens, never cookies, so no page acts with another user's
 * credentials) or the exact origins allowed.
 */
export interface CorsPolicy {
  /**
   * A preflight (OPTIONS): Hono's `cors` middleware, answered 204 by the outermost middleware
   * (lib/http/exchange.ts), so it never reaches the limiter or the database and is never charged.
   */
  readonly preflight: MiddlewareHandler;
  /**
   * The headers every other answer carries, with the request id: one plain record, written into the answer
   * as it is made (Hono's `cors` sets them on `c.res` before the handler runs, after which Hono copies every
   * handler's answer into a new, streamed one to merge them).
   */
  headersFor(requestId: string, origin: string | undefined): HeaderRecord;
}

export function corsPolicy(origins: '*' | readonly string[]): CorsPolicy {
  const anyOrigin = origins === '*';
  const allowed = new Set(anyOrigin ? [] : origins);
  const allowOrigin = (origin: string): string | null => (anyOrigin ? '*' : allowed.has(origin) ? origin : null);
  const exposed = EXPOSED_HEADERS.join(', ');
  const preflight = cors({
    origin: anyOrigin ? '*' : allowOrigin,
    allowMethods: ALLOWED_METHODS,
    allowHeaders: ALLOWED_HEADERS,
    exposeHeaders: EXPOSED_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
  });
  return {
    preflight,
    headersFor(requestId, origin): HeaderRecord {
      if (anyOrigin) return { 'x-request-id': requestId, 'access-control-allow-origin': '*', 'access-control-expose-headers': exposed };
      const allow = origin === undefined ? null : allowOrigin(origin);
      // With a list, the answer depends on the request's Origin: a cache must not hand it to another page.
      return allow === null
        ? { 'x-request-id': requestId, vary: 'Origin' }
        : { 'x-request-id': requestId, 'access-control-allow-origin': allow, 'access-control-expose-headers': exposed, vary: 'Origin' };
    },
  };
}
