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
  /** The rows its count read, when it counted (the cost of a count settles at them). */
  readonly counted?: number;
}

const itemsJsonOf = new WeakMap<readonly unknown[], string>();

/** The items as JSON; items that joined reads share (lib/pagination/shapes.ts, itemsOf) are written once. */
function itemsJson(items: readonly unknown[]): string {
  let json = itemsJsonOf.get(items);
  if (json === undefined) {
    json = JSON.stringify(items);
    itemsJsonOf.set(items, json);
  }
  return json;
}

/**
 * A chunk as its response: the variant's fields, then the items array named after the collection, then
 * `_links`. It carries an ETag keyed with `tagSecret` (the cursor secret), so a client can ask again with
 * If-None-Match and get a 304 while nothing changed, and `Cache-Control: private, no-cache`: a chunk is the client's own (its allowance is in the
 * headers), and a cache must ask before reusing it, since rows change at any time (docs/api.md, "Conditional
 * requests"). `pending` are added to the response's own (request id, CORS, rate limit, handed over by the app): written
 * into the plain header record the response is made with, they cost nothing more to send, where setting them
 * on the finished Response would turn its headers into a Headers object first.
 */
export function chunkResponse(collection: string, chunk: Chunk, tagSecret: string, pending?: PendingHeaders): Response {
  const fields = JSON.stringify(chunk.fields);
  const body = `${fields.length > 2 ? `${fields.slice(0, -1)},` : '{'}${JSON.stringify(collection)}:${itemsJson(chunk.items)},"_links":${JSON.stringify(linksObject(chunk.links))}}`;
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    link: `${linkHeader(chunk.links)}, ${SERVICE_LINKS}`,
    etag: weakEtag(tagSecret, body),
    'cache-control': 'private, no-cache',
  };
  mergeHeaders(headers, pending);
  return compressibleJson(body, headers);
}
