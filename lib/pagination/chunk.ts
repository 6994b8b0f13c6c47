// The chunk envelope every variant answers with: its own fields, the items named after the collection, links.
import { compressibleJson } from '../http/compression.ts';
import { weakEtag } from '../http/conditional.ts';
import { type Links, linkHeader, linksObject } from './links.ts';

/**
 * A chunk: the variant's fields, then the items array named after the collection, then `_links`. It carries
 * an ETag, so a client can ask again with If-None-Match and get a free 304 while nothing changed, and
 * `Cache-Control: private, no-cache`: a chunk is the client's own (its allowance is in the headers), and a
 * cache must ask before reusing it, since rows change at any time (docs/api.md, "Conditional requests").
 */
export function chunkResponse(collection: string, fields: Record<string, unknown>, items: unknown[], links: Links): Response {
  const body = JSON.stringify({ ...fields, [collection]: items, _links: linksObject(links) });
  return compressibleJson(body, { link: linkHeader(links), etag: weakEtag(body), 'cache-control': 'private, no-cache' });
}
