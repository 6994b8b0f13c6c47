// The chunk envelope every variant answers with: its own fields, the items named after the collection, links
// (and in the Link header, the service's description: lib/pagination/links.ts, SERVICE_LINKS).
import { compressibleJson } from '../http/compression.ts';
import { weakEtag } from '../http/conditional.ts';
import { mergeHeaders, type PendingHeaders } from '../http/response-headers.ts';
import { type Links, linkHeader, linksObject, SERVICE_LINKS } from './links.ts';

/** What a variant serves: its own fields, the items, and the links of the chunk. */
export interface Chunk {
  readonly fields: Record<string, unknown>;
  readonly items: unknown[];
  readonly links: Links;
}

/**
 * A chunk as its response: the variant's fields, then the items array named after the collection, then
 * `_links`. It carries an ETag, so a client can ask again with If-None-Match and get a free 304 while nothing
 * changed, and `Cache-Control: private, no-cache`: a chunk is the client's own (its allowance is in the
 * headers), and a cache must ask before reusing it, since rows change at any time (docs/api.md, "Conditional
 * requests"). `pending` are added to the response's own (request id, CORS, rate limit, handed over by the app): written
 * into the plain header record the response is made with, they cost nothing more to send, where setting them
 * on the finished Response would turn its headers into a Headers object first.
 */
export function chunkResponse(collection: string, chunk: Chunk, pending?: PendingHeaders): Response {
  const body = JSON.stringify({ ...chunk.fields, [collection]: chunk.items, _links: linksObject(chunk.links) });
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    link: `${linkHeader(chunk.links)}, ${SERVICE_LINKS}`,
    etag: weakEtag(body),
    'cache-control': 'private, no-cache',
  };
  mergeHeaders(headers, pending);
  return compressibleJson(body, headers);
}
