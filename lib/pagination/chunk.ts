// The chunk envelope and its links, shared by every variant: `_links` in the body and an RFC 8288 Link header.
import type { Config } from '../http/config.ts';
import { invalidParameter } from '../http/errors.ts';
import { peerIsProxy } from '../ratelimit/identity.ts';
import { encodeQueryComponent, VARIANT_PARAMS, type QueryParams } from './params.ts';

export type Links = Record<string, string | undefined>;

/**
 * Builds the links of one query: `href({ limit: '20', offset: '40' })` is the collection URL with
 * those parameters first, then the request's filters, sort and count mode.
 */
export function linkBuilder(collectionUrl: string, params: QueryParams) {
  const carried = [...params].filter(([name]) => !VARIANT_PARAMS.has(name));
  return function href(variantParams: Record<string, string | number>): string {
    const pairs = [...Object.entries(variantParams).map(([k, v]) => [k, String(v)] as const), ...carried];
    return pairs.length === 0 ? collectionUrl : `${collectionUrl}?${pairs.map(([k, v]) => `${encodeQueryComponent(k)}=${encodeQueryComponent(v)}`).join('&')}`;
  };
}

/** The body's `_links`: `{ self: { href } , next: { href }, … }`, absent links left out. */
export function linksObject(links: Links): Record<string, { href: string }> {
  const out: Record<string, { href: string }> = {};
  for (const [rel, href] of Object.entries(links)) if (href !== undefined) out[rel] = { href };
  return out;
}

/** RFC 8288: `<…>; rel="next", <…>; rel="self"`. */
export function linkHeader(links: Links): string {
  return Object.entries(links)
    .filter(([, href]) => href !== undefined)
    .map(([rel, href]) => `<${href}>; rel="${rel}"`)
    .join(', ');
}

/** A chunk: the variant's fields, then the items array named after the collection, then `_links`. */
export function chunkResponse(
  collection: string,
  fields: Record<string, unknown>,
  items: unknown[],
  links: Links,
): Response {
  const body = { ...fields, [collection]: items, _links: linksObject(links) };
  return new Response(JSON.stringify(body), {
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', link: linkHeader(links) },
  });
}

/** A longer origin makes every link, and the Link header, long: no host name is longer (RFC 1035: 253). */
const MAX_ORIGIN_LENGTH = 300;

/**
 * The absolute base of every href: PUBLIC_URL when set; otherwise the request's own origin, with
 * X-Forwarded-Proto/-Host (their first entries, what the proxy nearest the client saw) honoured only
 * when the socket's peer is one of our proxies (TRUST_PROXY), as for X-Forwarded-For.
 */
export function baseUrl(request: Request, config: Config, peer: string | undefined): string {
  if (config.publicUrl) return config.publicUrl;
  const url = new URL(request.url);
  if (peerIsProxy(config.trustProxy, peer)) {
    const proto = request.headers.get('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase();
    const host = request.headers.get('x-forwarded-host')?.split(',')[0]?.trim();
    if (proto === 'http' || proto === 'https') url.protocol = `${proto}:`;
    if (host && /^[A-Za-z0-9.\-:[\]]+$/.test(host)) {
      try {
        url.host = host;
        // Setting a host without a port keeps the request's own port: the forwarded host has none.
        if (!/:\d+$/.test(host)) url.port = '';
      } catch {
        // an unusable forwarded host: keep the request's own
      }
    }
  }
  if (url.origin.length > MAX_ORIGIN_LENGTH) {
    throw invalidParameter('Host', `makes links start with ${url.origin.length} characters; at most ${MAX_ORIGIN_LENGTH} are allowed`);
  }
  return url.origin;
}
