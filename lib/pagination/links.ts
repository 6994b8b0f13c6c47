// The links of a chunk: built from the request's own query, sent as `_links` in the body and as an
// RFC 8288 Link header.
import { encodeQueryComponent, type QueryParams } from './params.ts';
import { POSITION_PARAMS } from './variant-params.ts';

export type Links = Record<string, string | undefined>;

/**
 * Builds the links of one query: `href({ limit: '20', offset: '40' })` is the collection URL with
 * those parameters first, then the request's filters, sort and count mode. Made for every chunk: the
 * carried parameters are encoded once, and the function it returns is anonymous (no name to set on it).
 */
export function linkBuilder(collectionUrl: string, params: QueryParams): (variantParams: Record<string, string | number>) => string {
  let carried = '';
  for (const [name, value] of params) {
    if (POSITION_PARAMS.has(name)) continue;
    carried += `${carried === '' ? '' : '&'}${encodeQueryComponent(name)}=${encodeQueryComponent(value)}`;
  }
  return (variantParams) => {
    let query = '';
    for (const name in variantParams) {
      query += `${query === '' ? '' : '&'}${encodeQueryComponent(name)}=${encodeQueryComponent(String(variantParams[name]))}`;
    }
    if (carried !== '') query += query === '' ? carried : `&${carried}`;
    return query === '' ? collectionUrl : `${collectionUrl}?${query}`;
  };
}

/** The body's `_links`: `{ self: { href } , next: { href }, … }`, absent links left out. */
export function linksObject(links: Links): Record<string, { href: string }> {
  const out: Record<string, { href: string }> = {};
  for (const rel in links) {
    const href = links[rel];
    if (href !== undefined) out[rel] = { href };
  }
  return out;
}

/**
 * The links every chunk and the index send after their own (RFC 8631): the OpenAPI document that describes
 * the service and its docs page. Relative: a client resolves them against the URL it asked for.
 */
export const SERVICE_LINKS = '</openapi.json>; rel="service-desc", </docs>; rel="service-doc"';

/** RFC 8288: `<…>; rel="next", <…>; rel="self"`. */
export function linkHeader(links: Links): string {
  let header = '';
  for (const rel in links) {
    const href = links[rel];
    if (href !== undefined) header += `${header === '' ? '' : ', '}<${href}>; rel="${rel}"`;
  }
  return header;
}
