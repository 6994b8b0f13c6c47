// Bearer credentials (RFC 6750), read the same way by the API keys and the operator API.
import { createHash } from 'node:crypto';

/**
 * The token of `Authorization: Bearer <token>`, or of `token <token>`, which GitHub accepts too and
 * octokit sends; the scheme is case-insensitive (RFC 9110), the token is not.
 */
export function bearerToken(header: string): string | undefined {
  return /^(?:Bearer|token) +(\S+) *$/i.exec(header)?.[1];
}

/** SHA-256 of a credential: what is stored of an API key, and what the admin token is compared by. */
export function digest(credential: string): Buffer {
  return createHash('sha256').update(credential).digest();
}
