// The links of a chunk: built from the request's own query, sent as `_links` in the body and as an
// RFC 8288 Link header.
import { encodeQueryComponent, type QueryParams } from './params.ts';
import { POSITION_PARAMS } from './variants.ts';

export type Links = Record<string, string | undefined>;

/**
 * Builds the links of one query: `href({ limit: '20', offset: '40' })` is the collection URL with
 * those parameters first, then the request's filters, sort and count mode.
 */
export function linkBuilder(collectionUrl: string, params: QueryParams) {
  const carried = [...params].filter(([name]) => !POSITION_PARAMS.has(name));
  return function href(variantParams: Record<string, string | number>): string {
    const pairs = [...Object.entries(variantParams).map(([k, v]) => [k, String(v)] as const), ...carried];
    return pairs.length === 0
      ? collectionUrl
      : `${collectionUrl}?${pairs.map(([k, v]) => `${encodeQueryComponent(k)}=${encodeQueryComponent(v)}`).join('&')}`;
  };
}

/** The body's `_links`: `{ self: { href } , next: { href }, … }`, absent links left out. */
export function linksObject(links: Links): Record<string, { href: string }> {
  const out: Record<string, { href: string }> = {};
  for (const [rel, href] of Object.entries(links)) if (href !== undefined) out[rel] = { href };
  return out;
}

/**
 * The links every chunk and the index send after their own (RFC 8631): the OpenAPI document that describes
 * the service and its docs page. Relative: a client resolves them against the URL it asked for.
 */
export const SERVICE_LINKS = '</openapi.json>; rel="service-desc", </docs>; rel="service-doc"';

/** RFC 8288: `<…>; rel="next", <…>; rel="self"`. */
export function linkHeader(links: Links): string {
  return Object.entries(links)
    .filter(([, href]) => href !== undefined)
    .map(([rel, href]) => `<${href}>; rel="${rel}"`)
    .join(', ');
}
