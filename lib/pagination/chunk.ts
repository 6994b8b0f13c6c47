// The chunk envelope every variant answers with: its own fields, the items named after the collection, links.
import { type Links, linkHeader, linksObject } from './links.ts';

/** What a variant serves: its own fields, the items, and the links of the chunk. */
export interface Chunk {
  readonly fields: Record<string, unknown>;
  readonly items: unknown[];
  readonly links: Links;
}

/**
 * A chunk as its response: the variant's fields, then the items array named after the collection, then
 * `_links`. `headers` are added to the response's own (the rate limiter's, handed over by the app): written
 * into the plain header record the response is made with, they cost nothing more to send, where setting them
 * on the finished Response would turn its headers into a Headers object first.
 */
export function chunkResponse(collection: string, chunk: Chunk, headers?: Readonly<Record<string, string>>): Response {
  const body = { ...chunk.fields, [collection]: chunk.items, _links: linksObject(chunk.links) };
  return new Response(JSON.stringify(body), {
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', link: linkHeader(chunk.links), ...headers },
  });
}
