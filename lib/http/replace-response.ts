// Replacing the answer a Hono context holds with another, as it is.
import type { Context } from 'hono';

/**
 * Makes `response` the context's answer. Assigned over an answer already made, Hono's `res` setter would copy
 * it into a new, streamed Response to merge the old one's headers into it; clearing first sets it as it is
 * (its headers must already be complete).
 */
export function replaceResponse(c: Context, response: Response): void {
  c.res = undefined as unknown as Response;
  c.res = response;
}
