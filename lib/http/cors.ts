// Cross-origin reads from browser pages (docs/api.md, "CORS"): preflights answered at once, answers readable.
import type { MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import { addResponseHeaders } from './response-headers.ts';

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

/** Every method some path takes (docs/api.md, "URLs"). */
const ALLOWED_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** How long a browser may keep a preflight's answer: Chromium caps it at two hours. */
const PREFLIGHT_MAX_AGE_SECONDS = 7200;

/**
 * The CORS middleware, for every path, ahead of the rate limiter. `origins`: `*` (any page; the API is
 * read-only for anonymous clients and keys are bearer tokens, never cookies, so no page acts with another
 * user's credentials) or the exact origins allowed.
 *
 * A preflight (OPTIONS) is Hono's `cors` middleware: answered 204 here, so it never reaches the limiter or
 * the database and is never charged. Other requests get the same headers from the same options, set on the
 * answer in place once it is made: Hono's `cors` sets them on `c.res` before the handler runs, after which
 * Hono copies every handler's answer into a new, streamed one to merge them (Context's `res` setter), which
 * the service's answers otherwise never pay for.
 */
export function corsPolicy(origins: '*' | readonly string[]): MiddlewareHandler {
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

  // The CORS headers of an answer to any page (`*`), made once.
  const toAnyPage = { 'access-control-allow-origin': '*', 'access-control-expose-headers': exposed };

  // Not async, like requestIds(): nothing is done after the layers inside.
  return function corsHeaders(c, next) {
    if (c.req.method === 'OPTIONS') return preflight(c, next);
    if (anyOrigin) {
      addResponseHeaders(c, toAnyPage);
    } else {
      const origin = c.req.header('origin');
      const allow = origin === undefined ? null : allowOrigin(origin);
      const headers: Record<string, string> =
        allow === null ? {} : { 'access-control-allow-origin': allow, 'access-control-expose-headers': exposed };
      // With a list, the answer depends on the request's Origin: a cache must not hand it to another page.
      headers.vary = 'Origin';
      addResponseHeaders(c, headers);
    }
    return next();
  };
}
