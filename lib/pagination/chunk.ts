// The chunk envelope every variant answers with: its own fields, the items named after the collection, links
// (and in the Link header, the service's description: lib/pagination/links.ts, SERVICE_LINKS).
import { type Links, linkHeader, linksObject, SERVICE_LINKS } from './links.ts';

/** A chunk: the variant's fields, then the items array named after the collection, then `_links`. */
export function chunkResponse(collection: string, fields: Record<string, unknown>, items: unknown[], links: Links): Response {
  const body = { ...fields, [collection]: items, _links: linksObject(links) };
  return new Response(JSON.stringify(body), {
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', link: `${linkHeader(links)}, ${SERVICE_LINKS}` },
  });
}
