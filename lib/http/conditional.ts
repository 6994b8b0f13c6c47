// Conditional requests (RFC 9110 section 13): a weak ETag on an answer, and a 304 for a client that has it.
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { replaceResponse } from './replace-response.ts';

// Each secret's tag key, derived once: the HMAC of a constant label under the secret, so that the key that
// tags bodies is never the key that signs cursors.
const tagKeys = new Map<string, KeyObject>();

function tagKey(secret: string): KeyObject {
  let key = tagKeys.get(secret);
  if (key === undefined) {
    key = createSecretKey(createHmac('sha256', secret).update('etag-v1').digest());
    if (tagKeys.size >= 100) tagKeys.clear(); // a process has one secret; tests make many
    tagKeys.set(secret, key);
  }
  return key;
}

/**
 * The weak ETag of a body: an HMAC of it under a key derived from `secret` (the cursor secret, the same on
 * every instance), 160 bits in base64url. Keyed, so that no client can compute the tag of a body it was
 * never sent: a plain digest let a client predict an empty chunk's body for any filter and learn from a
 * free 304 that nothing matched. Weak, since the same JSON may be sent compressed or not (RFC 9110 section
 * 8.8.1); a digest of the whole body, so that any change to an item or a link changes it.
 */
export function weakEtag(secret: string, body: string): string {
  return `W/"${createHmac('sha256', tagKey(secret)).update(body).digest().toString('base64url', 0, 20)}"`;
}

/**
 * Whether If-None-Match is `*`, which matches any current representation (RFC 9110 section 13.1.2): a 304
 * to it proves nothing the client had, so the rate limiter gives nothing back for it.
 */
export function matchesAny(header: string | undefined): boolean {
  return header?.split(',').some((entry) => entry.trim() === '*') === true;
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
 * back the units that paid for sending items (docs/rate-limit.md, "Conditional requests"). A request without If-None-Match
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
