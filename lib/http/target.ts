// Whether a request's Host and target make a URL, checked the same way on Node, Deno and Bun before the app
// sees the request: each runtime builds `request.url` from them in its own way (Deno glues them together as
// sent, Bun leaves only the path when it cannot read the Host), and the app reads that URL for every link.
import type { Hono } from 'hono';
import { type ApiError, invalidParameter, problemResponse } from './errors.ts';
import type { Refused } from './refused.ts';
import { requestIdOf } from './request-id.ts';

/**
 * Paths whose answer does not depend on the Host: a load balancer's health check may leave Host out
 * (HAProxy's `option httpchk` sends HTTP/1.0 without one), and must not read a 400 as an instance down.
 */
const HOSTLESS_PATHS = new Set(['/healthz', '/readyz']);

/** The Host a health check without one is served as; it appears in no answer. */
export const HEALTH_CHECK_HOST = 'localhost';

/** Whether a request without a Host header to `target` is served all the same. */
export function servedWithoutHost(target: string): boolean {
  return HOSTLESS_PATHS.has(target);
}

/** The last Host found good: nearly every request of an instance carries the same one, checked once. */
let goodHost = '';

/**
 * What a Host may be made of: a name of RFC 3986's unreserved characters (letters, digits, `-`, `.`, `_`, `~`), or an
 * IP literal in brackets, then an optional port. WHATWG's URL takes more as a host (`a"b`, `a{b`, `a|b`, `a,b`): every
 * link starts with it, in bodies and in the Link header, where `"`, `,` and `;` are its own punctuation.
 */
const HOST_SHAPE = /^(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The problem with a Host header, or undefined when it is a host name or address with an optional port
 * (RFC 9112 section 3.2: a missing or invalid Host is a 400). WHATWG's URL reads much that is no host
 * (`a@b`, user info; `x/y` or `x?y`, a path or query) and normalizes some (`0x7f.1`): the host it reads must
 * be the one sent, as @hono/node-server checks on Node.
 */
export function hostProblem(host: string | null | undefined): ApiError | undefined {
  if (host === goodHost) return undefined;
  if (host === undefined || host === null || host === '') return invalidParameter('Host', 'is missing: HTTP/1.1 requires it');
  const origin = `http://${host}`;
  const parsed = HOST_SHAPE.test(host) && URL.canParse(origin) ? new URL(origin) : undefined;
  if (parsed === undefined || parsed.hostname !== host.replace(/:\d+$/, '').toLowerCase()) {
    return invalidParameter('Host', 'is malformed: not a host name or address with an optional port');
  }
  goodHost = host;
  return undefined;
}

/**
 * The problem with a request of several Host fields (RFC 9112 section 3.2: a 400), from node:http's raw
 * headers: it keeps the first Host and drops the others, where Bun joins them into one Host (then refused by
 * `hostProblem`) and Deno refuses the request itself.
 */
export function repeatedHostProblem(rawHeaders: readonly string[]): ApiError | undefined {
  let hosts = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    // Lower-casing only what may be a Host: this runs on every request.
    if (name.length === 4 && (name === 'Host' || name === 'host' || name.toLowerCase() === 'host') && ++hosts > 1) {
      return invalidParameter('Host', 'is sent more than once');
    }
  }
  return undefined;
}

/** Whether `url` has a backslash before its query: @hono/node-server refuses one, which URL would read as `/`. */
function backslashInPath(url: string): boolean {
  const backslash = url.indexOf('\\');
  if (backslash === -1) return false;
  const query = url.indexOf('?');
  return query === -1 || backslash < query;
}

const MALFORMED_TARGET = 'is malformed: not a path, nor an absolute http(s) URL';

/** The problem with a request target as Node's parser hands it on (a path, or an absolute URL), or undefined. */
export function targetProblem(target: string): ApiError | undefined {
  const absolute = target.startsWith('http://') || target.startsWith('https://');
  if (!(target.startsWith('/') || (absolute && URL.canParse(target)))) return invalidParameter('url', MALFORMED_TARGET);
  if (backslashInPath(target)) return invalidParameter('url', 'is malformed: a backslash in the path');
  return undefined;
}

/** The path and query of a URL Deno or Bun built, which may be only those (Bun's, without a Host); '' if none. */
function targetOf(url: string): string {
  if (url.startsWith('/')) return url;
  if (!URL.canParse(url)) return '';
  const parsed = new URL(url);
  return parsed.pathname + parsed.search;
}

/**
 * The app's `fetch` for Deno and Bun, behind the checks Node's entry makes in lib/http/listener.ts: a bad or
 * missing Host, or a URL the runtime built that cannot be read, is a 400 problem+json answered here, before
 * the rate limiter (never charged), and recorded by `refused`.
 */
export function checkedFetch<E>(app: Pick<Hono, 'fetch'>, refused: Refused): (request: Request, env: E) => Response | Promise<Response> {
  return function fetchChecked(request, env) {
    const host = request.headers.get('host');
    const url = request.url;
    if (host === null) {
      const target = targetOf(url);
      if (servedWithoutHost(target)) {
        // Deno made its own origin up; Bun left the path alone, which no URL reads.
        return app.fetch(URL.canParse(url) ? request : new Request(`http://${HEALTH_CHECK_HOST}${target}`, request), env);
      }
    }
    const problem =
      hostProblem(host) ?? (URL.canParse(url) && !backslashInPath(url) ? undefined : invalidParameter('url', MALFORMED_TARGET));
    if (problem === undefined) return app.fetch(request, env);
    const id = requestIdOf(request.headers.get('x-request-id') ?? undefined);
    refused(problem, id, request.method);
    return problemResponse(problem, id);
  };
}
