// Conditional requests (RFC 9110 section 13): a weak ETag on an answer, and a 304 for a client that has it.
import { hash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { replaceResponse } from './replace-response.ts';

/**
 * The weak ETag of a body: its SHA-1 in base64url. Weak, since the same JSON may be sent compressed or not
 * (RFC 9110 section 8.8.1); a digest of the whole body, so that any change to an item or a link changes it.
 * About 6 µs for a 100-item chunk (docs/benchmarks.md, "Conditional requests and compression").
 */
export function weakEtag(body: string): string {
  // One-shot: no Hash object per chunk.
  return `W/"${hash('sha1', body, 'base64url')}"`;
}

/** Whether If-None-Match names `etag`, by weak comparison (RFC 9110 section 13.1.2): `*`, or one of its tags. */
function ifNoneMatchHits(header: string, etag: string): boolean {
  const opaque = etag.startsWith('W/') ? etag.slice(2) : etag;
  for (const entry of header.split(',')) {
    const tag = entry.trim();
    if (tag === '*' || tag === opaque || (tag.startsWith('W/') && tag.slice(2) === opaque)) return true;
  }
  return false;
}

/**
 * What a 304 leaves out of the 200 it stands for: the representation's own metadata and links (RFC 9110
 * section 15.4.5). It repeats the rest: ETag, Cache-Control and Vary, which it must, and the request id, CORS
 * and rate-limit headers the chunk was made with (lib/http/response-headers.ts).
 */
const LEFT_OUT = new Set(['content-type', 'content-length', 'content-encoding', 'link']);

/**
 * The conditional request middleware: a GET or HEAD with If-None-Match that names the ETag of its 200 is
 * answered 304 Not Modified, without a body. The middleware before it see the 304: the rate limiter gives
 * its units back (docs/rate-limit.md, "Conditional requests are free"). A request without If-None-Match
 * costs one header lookup.
 */
export function conditionalRequests(): MiddlewareHandler {
  return async function conditional(c, next) {
    await next();
    const header = c.req.header('if-none-match');
    if (header === undefined || c.res.status !== 200) return;
    const headers = c.res.headers;
    const etag = headers.get('etag');
    if (etag === null || !ifNoneMatchHits(header, etag)) return;
    const kept = new Headers();
    for (const [name, value] of headers) if (!LEFT_OUT.has(name)) kept.append(name, value);
    replaceResponse(c, new Response(null, { status: 304, headers: kept }));
  };
}
