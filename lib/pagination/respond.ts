// A chunk's answer: 200 with its body (compressed when the client takes it), or 304 Not Modified, its headers
// written once, in one plain record.
import { type Compressor, compressible } from '../http/compression.ts';
import { type HeaderRecord, mergeHeaders } from '../http/header-record.ts';
import type { RenderedChunk } from './chunk.ts';

/**
 * `Cache-Control: private, no-cache`: a chunk is the client's own (its allowance is in the headers), and a cache
 * must ask before reusing it, since rows change at any time (docs/reference/api.md, "Conditional requests").
 */
const CACHE_CONTROL = 'private, no-cache';

/** What of the request its answer depends on. */
export interface ChunkRequestHeaders {
  readonly method: string;
  readonly acceptEncoding: string | undefined;
}

/**
 * The answer to a chunk `rendered`, with `headers` (request id, CORS, rate limit) written after its own. A body
 * from the compression threshold on says `Vary: Accept-Encoding` (what a cache stores depends on it), compressed
 * or not; a GET from a client that takes br or gzip gets it compressed. `notModified`: a 304, which leaves out
 * the representation's own metadata and links (RFC 9110 section 15.4.5) and repeats ETag, Cache-Control and Vary.
 */
export function respond(
  rendered: RenderedChunk,
  notModified: boolean,
  request: ChunkRequestHeaders,
  compressor: Compressor,
  ...headers: (HeaderRecord | undefined)[]
): Response {
  const { body, etag } = rendered;
  const varies = compressible(body);
  if (notModified) {
    const record = mergeHeaders({ etag, 'cache-control': CACHE_CONTROL }, ...headers);
    if (varies) varyByEncoding(record);
    return new Response(null, { status: 304, headers: record });
  }
  const record: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    link: rendered.link,
    etag,
    'cache-control': CACHE_CONTROL,
  };
  mergeHeaders(record, ...headers);
  if (varies) varyByEncoding(record);
  const compressed = request.method === 'GET' ? compressor.compress(body, etag, request.acceptEncoding) : undefined;
  if (compressed === undefined) return new Response(body, { status: 200, headers: record });
  record['content-encoding'] = compressed.encoding;
  return new Response(compressed.body, { status: 200, headers: record });
}

/** Adds Accept-Encoding to what the answer varies by, after what the other layers said (Origin). */
function varyByEncoding(record: Record<string, string>): void {
  record.vary = record.vary === undefined ? 'Accept-Encoding' : `${record.vary}, Accept-Encoding`;
}
