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

/**
 * gzip's level and brotli's quality, chosen from the same table and the bench's compressed rows: past them,
 * the work grows much faster than the bytes fall, and a compressed chunk must cost little more than the same
 * chunk as it is, since the rate limiter charges both alike (docs/rate-limit.md).
 */
const GZIP_OPTIONS = { level: 3 };
const BROTLI_QUALITY = 2;

/**
 * How many bytes of compressed chunks the middleware keeps, to send again without compressing when the same
 * chunk is asked for again: a popular chunk (a collection's first) is compressed once, not at every request.
 */
const KEPT_BYTES = 4 * 1024 * 1024;

/** The encodings offered, the server's preference first where the client weighs them alike: br is smaller. */
const ENCODINGS = ['br', 'gzip'];

/**
 * What the service made an answer's body from: the string, compressed from it rather than read back, and the
 * answer's ETag, a digest of that string (lib/http/conditional.ts, weakEtag) that names it among those kept.
 */
interface Compressible {
  body: string;
  etag: string | undefined;
}

/** Answers made by compressibleJson, by answer. */
const compressibles = new WeakMap<Response, Compressible>();

/**
 * A JSON answer that may be compressed: bodies from the threshold on are kept for the compression middleware
 * and say `Vary: Accept-Encoding` (what a cache stores depends on it), whether compressed or not. `headers`,
 * its headers with its Content-Type, becomes the answer's own (not copied).
 */
export function compressibleJson(body: string, headers: Record<string, string>): Response {
  const compressible = body.length >= COMPRESSION_THRESHOLD;
  if (compressible) headers.vary = headers.vary === undefined ? 'Accept-Encoding' : `${headers.vary}, Accept-Encoding`;
  const response = new Response(body, { status: 200, headers });
  if (compressible) compressibles.set(response, { body, etag: headers.etag });
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

function compress(body: string, encoding: string): Uint8Array {
  if (encoding === 'gzip') return gzipSync(body, GZIP_OPTIONS);
  return brotliCompressSync(body, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
    },
  });
}

/**
 * Compressed chunks by encoding and ETag, the least recently sent dropped first past `budget` bytes. A Map
 * keeps its keys in insertion order: a chunk sent again is moved to the end.
 */
class KeptChunks {
  private readonly chunks = new Map<string, Uint8Array<ArrayBuffer>>();
  private readonly budget: number;
  private bytes = 0;

  constructor(budget: number) {
    this.budget = budget;
  }

  get(key: string): Uint8Array<ArrayBuffer> | undefined {
    const chunk = this.chunks.get(key);
    if (chunk !== undefined) {
      this.chunks.delete(key);
      this.chunks.set(key, chunk);
    }
    return chunk;
  }

  set(key: string, chunk: Uint8Array<ArrayBuffer>): void {
    if (chunk.byteLength > this.budget) return;
    this.chunks.set(key, chunk);
    this.bytes += chunk.byteLength;
    for (const [oldest, kept] of this.chunks) {
      if (this.bytes <= this.budget) break;
      this.chunks.delete(oldest);
      this.bytes -= kept.byteLength;
    }
  }
}

/**
 * The compression middleware: a GET of an answer made by compressibleJson, from a client whose
 * Accept-Encoding takes br or gzip, is sent compressed, synchronously: at these levels a 100-item chunk
 * takes less of the one thread than handing it to another would (docs/benchmarks.md, "Conditional requests
 * and compression"). A chunk with the ETag and encoding of one compressed lately is sent as kept, not
 * compressed again. Nothing is done for a request without Accept-Encoding, nor for a body under the
 * threshold; a HEAD is answered as it is.
 */
export function compression(): MiddlewareHandler {
  const kept = new KeptChunks(KEPT_BYTES);
  return async function compressed(c, next) {
    await next();
    const accept = c.req.header('accept-encoding');
    if (accept === undefined || c.req.method !== 'GET') return;
    const response = c.res;
    const compressible = compressibles.get(response);
    if (compressible === undefined || response.status !== 200) return;
    const encoding = negotiate(accept);
    if (encoding === undefined) return;
    const { body, etag } = compressible;
    const key = etag === undefined ? undefined : `${encoding} ${etag}`;
    let compressedBody = key === undefined ? undefined : kept.get(key);
    if (compressedBody === undefined) {
      // A copy of its own size: zlib's answer is a view of a larger buffer, which keeping it would keep whole.
      compressedBody = new Uint8Array(compress(body, encoding));
      if (key !== undefined) kept.set(key, compressedBody);
    }
    const headers = response.headers;
    headers.set('content-encoding', encoding);
    headers.delete('content-length');
    replaceResponse(c, new Response(compressedBody, { status: 200, headers }));
  };
}
