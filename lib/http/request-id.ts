// The request id of every answer (docs/reference/api.md, "Request ids"): the client's own when it is sane, else a fresh one.
import { randomUUID } from 'node:crypto';

/**
 * A request id a client may choose: 1 to 128 characters of letters, digits and `_ - . : = + /` (UUIDs,
 * ULIDs, base64 and the `Root=1-…` of AWS's trace ids fit). Anything else is replaced, never echoed: the id
 * goes into headers, bodies and logs.
 */
const SANE_ID = /^[\w.:=+/-]{1,128}$/;

/** The client's X-Request-Id when it is sane, otherwise a new random UUID. */
export function requestIdOf(header: string | undefined): string {
  return header !== undefined && SANE_ID.test(header) ? header : randomUUID();
}
