// Conditional requests (RFC 9110 section 13): a weak ETag on an answer, and a 304 for a client that has it.
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { remembered } from './remembered.ts';

// Each secret's tag key, derived once: the HMAC of a constant label under the secret, so that the key that
// tags bodies is never the key that signs cursors. A process has one secret; tests make many.
const tagKey = remembered(100, (secret: string): KeyObject => createSecretKey(createHmac('sha256', secret).update('etag-v1').digest()));

/**
 * The weak ETag of a body: an HMAC of it under a key derived from `secret` (the cursor secret, the same on
 * every instance), 160 bits in base64url. Keyed, so that no client can compute the tag of a body it was
 * never sent: a plain digest let a client predict an empty chunk's body for any filter and learn from a
 * free 304 that nothing matched. Weak, since the same JSON may be sent compressed or not (RFC 9110 section
 * 8.8.1); a digest of the whole body, so that any change to an item or a link changes it. `scope`, when not
 * empty, is digested before the body: what else the tag is keyed by (the client's rows), so that equal bodies
 * of different scopes never share a tag.
 */
export function weakEtag(secret: string, body: Uint8Array, scope = ''): string {
  const hmac = createHmac('sha256', tagKey(secret));
  if (scope !== '') hmac.update(scope).update('\n');
  return `W/"${hmac.update(body).digest().toString('base64url', 0, 20)}"`;
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
 * Whether a GET or HEAD with `ifNoneMatch` is answered 304 Not Modified for an answer tagged `etag`: the
 * header names it, by weak comparison (RFC 9110 section 13.1.2), or is `*`. The rate limiter gives back the
 * units that paid for sending items for a 304 to a tag (docs/reference/costs.md, "Conditional requests").
 */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  return ifNoneMatch !== undefined && ifNoneMatchHits(ifNoneMatch, etag);
}
