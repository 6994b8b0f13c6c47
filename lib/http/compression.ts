// Compression of JSON answers (docs/api.md, "Compression"): gzip or br above a size, by the client's Accept-Encoding.
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import type { MiddlewareHandler } from 'hono';
import Negotiator from 'negotiator';
import { replaceResponse } from './replace-response.ts';

/**
 * Bodies shorter than this (in UTF-16 code units, bytes for the ASCII of the demo collections) are sent as
 * they are; chosen from `npm run bench`'s compression table (docs/benchmarks.md, "Conditional requests and
 * compression"): below it, compressing costs more CPU than the few hundred bytes it saves are worth.
 */
export const COMPRESSION_THRESHOLD = 1400;

/** gzip's level and brotli's quality, chosen from the same table: past them, CPU grows and bytes barely fall. */
const GZIP_OPTIONS = { level: 4 };
const BROTLI_QUALITY = 4;

/** The encodings offered, the server's preference first where the client weighs them alike: br is smaller. */
const ENCODINGS = ['br', 'gzip'];

/** Answers whose body the service made from a string it keeps: compressed from that string, never read back. */
const bodies = new WeakMap<Response, string>();

/**
 * A JSON answer that may be compressed: bodies from the threshold on are kept for the compression middleware
 * and say `Vary: Accept-Encoding` (what a cache stores depends on it), whether compressed or not. `headers`,
 * its headers with its Content-Type, becomes the answer's own (not copied).
 */
export function compressibleJson(body: string, headers: Record<string, string>): Response {
  const compressible = body.length >= COMPRESSION_THRESHOLD;
  if (compressible) headers.vary = headers.vary === undefined ? 'Accept-Encoding' : `${headers.vary}, Accept-Encoding`;
  const response = new Response(body, { status: 200, headers });
  if (compressible) bodies.set(response, body);
  return response;
}

/** The encoding the client takes best of those offered, or undefined for the body as it is. */
function negotiate(acceptEncoding: string): string | undefined {
  const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } });
  // negotiator 1.x takes the server's preference, for encodings the client weighs alike; its types predate it.
  const encoding = negotiator.encoding as (this: Negotiator, available: string[], options: { preferred: string[] }) => string | undefined;
  const chosen = encoding.call(negotiator, ENCODINGS, { preferred: ENCODINGS });
  return chosen === 'br' || chosen === 'gzip' ? chosen : undefined;
}

function compress(body: string, encoding: string): Uint8Array<ArrayBuffer> {
  // A Buffer is a Uint8Array; its type leaves the kind of its ArrayBuffer open.
  if (encoding === 'gzip') return gzipSync(body, GZIP_OPTIONS) as Uint8Array<ArrayBuffer>;
  return brotliCompressSync(body, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
    },
  }) as Uint8Array<ArrayBuffer>;
}

/**
 * The compression middleware: a GET of an answer made by compressibleJson, from a client whose
 * Accept-Encoding takes br or gzip, is sent compressed, synchronously (a 100-item chunk takes tens of
 * microseconds, docs/benchmarks.md). Nothing is done for a request
 * without Accept-Encoding, nor for a body under the threshold; a HEAD is answered as it is.
 */
export function compression(): MiddlewareHandler {
  return async function compressed(c, next) {
    await next();
    const accept = c.req.header('accept-encoding');
    if (accept === undefined || c.req.method !== 'GET') return;
    const response = c.res;
    const body = bodies.get(response);
    if (body === undefined || response.status !== 200) return;
    const encoding = negotiate(accept);
    if (encoding === undefined) return;
    const headers = response.headers;
    headers.set('content-encoding', encoding);
    headers.delete('content-length');
    replaceResponse(c, new Response(compress(body, encoding), { status: 200, headers }));
  };
}
