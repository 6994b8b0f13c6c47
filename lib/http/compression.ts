// Compression of JSON answers (docs/reference/api.md, "Compression"): gzip or br above a size, by the client's Accept-Encoding.
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import Negotiator from 'negotiator';

/**
 * Bodies shorter than this many bytes are sent as they are; chosen from `npm run bench`'s compression table (docs/benchmarks.md,
 * "Compression"): below it, compressing costs more CPU than the few hundred bytes it saves are worth.
 */
export const COMPRESSION_THRESHOLD = 1400;

/**
 * gzip's level and brotli's quality, chosen from the same table and the bench's compressed rows: past them,
 * the work grows much faster than the bytes fall, and a compressed chunk must cost little more than the same
 * chunk as it is, since the rate limiter charges both alike (docs/reference/costs.md).
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

/** The encoding the client takes best of those offered, or undefined for the body as it is. */
function negotiate(acceptEncoding: string): string | undefined {
  const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } });
  // negotiator 1.x takes the server's preference, for encodings the client weighs alike; its types predate it.
  const encoding = negotiator.encoding as (this: Negotiator, available: string[], options: { preferred: string[] }) => string | undefined;
  const chosen = encoding.call(negotiator, ENCODINGS, { preferred: ENCODINGS });
  return chosen === 'br' || chosen === 'gzip' ? chosen : undefined;
}

function compress(body: Uint8Array, encoding: string): Uint8Array {
  if (encoding === 'gzip') return gzipSync(body, GZIP_OPTIONS);
  return brotliCompressSync(body, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength,
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
 * A compressed body and its encoding, for the answer's Content-Encoding; undefined: sent as it is.
 */
export interface Compressed {
  readonly encoding: string;
  readonly body: Uint8Array<ArrayBuffer>;
}

/** Whether a JSON body of this length is worth compressing: its answer then says `Vary: Accept-Encoding`. */
export function compressible(body: Uint8Array): boolean {
  return body.byteLength >= COMPRESSION_THRESHOLD;
}

/**
 * The compressor of an app: a JSON body from the threshold on, for a GET from a client whose Accept-Encoding
 * takes br or gzip, is compressed synchronously: at these levels a 100-item chunk takes less of the one thread
 * than handing it to another would (docs/benchmarks.md, "Compression"). A body with
 * the ETag and encoding of one compressed lately is sent as kept, not compressed again. Nothing is done for a
 * request without Accept-Encoding, nor for a body under the threshold.
 */
export class Compressor {
  private readonly kept = new KeptChunks(KEPT_BYTES);

  /** `body` compressed as `acceptEncoding` asks, or undefined to send it as it is; `etag` names it among those kept. */
  compress(body: Uint8Array, etag: string | undefined, acceptEncoding: string | undefined): Compressed | undefined {
    if (acceptEncoding === undefined || !compressible(body)) return undefined;
    const encoding = negotiate(acceptEncoding);
    if (encoding === undefined) return undefined;
    const key = etag === undefined ? undefined : `${encoding} ${etag}`;
    let compressed = key === undefined ? undefined : this.kept.get(key);
    if (compressed === undefined) {
      // A copy of its own size: zlib's answer is a view of a larger buffer, which keeping it would keep whole.
      compressed = new Uint8Array(compress(body, encoding));
      if (key !== undefined) this.kept.set(key, compressed);
    }
    return { encoding, body: compressed };
  }
}
