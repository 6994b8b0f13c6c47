// The chunk envelope every variant answers with: its own fields, the items named after the collection, links
// (and in the Link header, the service's description: lib/pagination/links.ts, SERVICE_LINKS), and its ETag.
import { weakEtag } from '../http/conditional.ts';
import { sharedItems } from './items.ts';
import { type Links, linkHeader, linksObject, SERVICE_LINKS } from './links.ts';

/** What a variant serves: its own fields, the items, and the links of the chunk. */
export interface Chunk {
  readonly fields: Record<string, unknown>;
  readonly items: unknown[];
  readonly links: Links;
  /** The rows its count read, when it counted (the cost of a count settles at them). */
  readonly counted?: number;
}

/** A chunk as the body and headers of its answer. */
export interface RenderedChunk {
  /**
   * The JSON as UTF-8, encoded once: the ETag's digest, the compressor and the socket all take the bytes, where
   * a string would be encoded again by each.
   */
  readonly body: Uint8Array<ArrayBuffer>;
  /** Weak, keyed with the cursor secret (lib/http/conditional.ts, weakEtag). */
  readonly etag: string;
  readonly link: string;
}

const utf8 = new TextEncoder();

const itemsJsonOf = new WeakMap<readonly unknown[], string>();

/**
 * The items as JSON, when a read that requests shared made them (lib/pagination/items.ts, sharedItems): one
 * array, written once, a cache of the array's, not of any request's; undefined for the items of one request.
 */
function sharedItemsJson(items: readonly unknown[]): string | undefined {
  if (!sharedItems(items)) return undefined;
  let json = itemsJsonOf.get(items);
  if (json === undefined) {
    json = JSON.stringify(items);
    itemsJsonOf.set(items, json);
  }
  return json;
}

/**
 * A chunk's body: the variant's fields, then the items array named after the collection, then `_links`; its
 * ETag keyed with `tagSecret` (the cursor secret) and the client's rows (`rows`, lib/pagination/access.ts:
 * '' when every client reads the same rows), so a client can ask again with If-None-Match and get a 304
 * while nothing changed, and no tag of one tenant's chunk matches another's, however alike their bodies; and
 * its Link header.
 */
export function renderChunk(collection: string, chunk: Chunk, tagSecret: string, rows = ''): RenderedChunk {
  const items = sharedItemsJson(chunk.items);
  // A request's own items are written with the rest in one pass: no string of them alone, nor a copy joining it to the rest.
  const json =
    items === undefined
      ? JSON.stringify({ ...chunk.fields, [collection]: chunk.items, _links: linksObject(chunk.links) })
      : joined(JSON.stringify(chunk.fields), collection, items, chunk.links);
  const body = utf8.encode(json);
  return { body, etag: weakEtag(tagSecret, body, rows), link: `${linkHeader(chunk.links)}, ${SERVICE_LINKS}` };
}

/** The body around items already written: the fields, the items named after the collection, and `_links`. */
function joined(fields: string, collection: string, items: string, links: Links): string {
  return `${fields.length > 2 ? `${fields.slice(0, -1)},` : '{'}${JSON.stringify(collection)}:${items},"_links":${JSON.stringify(linksObject(links))}}`;
}
