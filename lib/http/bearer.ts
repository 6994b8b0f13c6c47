// Bearer credentials (RFC 6750), read the same way by the API keys, the operator API and /metrics.
import { hash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { ApiError } from './errors.ts';

/**
 * The token of `Authorization: Bearer <token>`, or of `token <token>`, which GitHub accepts too and
 * octokit sends; the scheme is case-insensitive (RFC 9110), the token is not.
 */
export function bearerToken(header: string): string | undefined {
  return /^(?:Bearer|token) +(\S+) *$/i.exec(header)?.[1];
}

/** SHA-256 of a credential: what is stored of an API key, and what the admin token is compared by. */
export function digest(credential: string): Buffer {
  // One-shot: no Hash object to make for every request that carries a key.
  return hash('sha256', credential, 'buffer');
}

/**
 * Bearer $ADMIN_TOKEN, compared in constant time (digests of equal length, timingSafeEqual): a 401 without
 * the header, a 403 with another token. `what` names the guarded thing in the 401's detail.
 */
export function requireAdminToken(adminToken: string, what: string): MiddlewareHandler {
  const expected = digest(adminToken);
  return async function adminAuth(c, next) {
    const header = c.req.header('authorization');
    if (header === undefined) throw new ApiError('unauthorized', `${what} needs Authorization: Bearer <admin token>`);
    const token = bearerToken(header) ?? '';
    if (!timingSafeEqual(digest(token), expected)) throw new ApiError('forbidden', 'The admin token is not valid');
    await next();
  };
}
