// Who the client is and which URL it asked for, when proxies stand between it and us: the socket's peer,
// and the X-Forwarded-* headers that count only when that peer is one of our proxies (TRUST_PROXY).
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import proxyaddr from 'proxy-addr';
import { invalidParameter } from './errors.ts';
import { remembered } from './remembered.ts';

/**
 * Which peers are our proxies (TRUST_PROXY): none; the nearest `hops` peers, whoever they are; or
 * the peers within `addresses` (addresses, CIDRs, or proxy-addr's loopback, linklocal, uniquelocal).
 */
export type TrustProxy =
  | { readonly kind: 'none' }
  | { readonly kind: 'hops'; readonly hops: number }
  | { readonly kind: 'addresses'; readonly addresses: readonly string[] };

/** proxy-addr's trust function: is the hop `i` away (0: the socket's peer) at `address` one of our proxies? */
type TrustFunction = (address: string, i: number) => boolean;

/** The socket's remote address; undefined under app.request() in tests, where there is no socket. */
export function socketAddress(c: Context): string | undefined {
  try {
    return getConnInfo(c).remote.address;
  } catch {
    return undefined;
  }
}

const compiled = new WeakMap<TrustProxy, TrustFunction>();

/**
 * The trust function of a setting, compiled once per setting; throws proxy-addr's TypeError on an
 * address it cannot read (config.ts checks every setting at start-up).
 */
export function trustFunction(trust: TrustProxy): TrustFunction {
  let fn = compiled.get(trust);
  if (fn === undefined) {
    if (trust.kind === 'none') fn = () => false;
    else if (trust.kind === 'hops') fn = (_address, i) => i < trust.hops;
    else fn = proxyaddr.compile([...trust.addresses]);
    compiled.set(trust, fn);
  }
  return fn;
}

/** Whether the socket's peer is one of our proxies, so that its X-Forwarded-* headers count. */
export function peerIsProxy(trust: TrustProxy, peer: string | undefined): boolean {
  if (trust.kind === 'none') return false;
  if (trust.kind === 'hops') return trust.hops > 0;
  return peer !== undefined && trustFunction(trust)(peer, 0);
}

/** What decides the origin of links: PUBLIC_URL when set, otherwise the request's own, behind trusted proxies. */
export interface LinkOrigin {
  readonly publicUrl: string | undefined;
  readonly trustProxy: TrustProxy;
}

/** A longer origin makes every link, and the Link header, long: no host name is longer (RFC 1035: 253). */
const MAX_ORIGIN_LENGTH = 300;

/**
 * The absolute base of every href: PUBLIC_URL when set; otherwise the request's own origin, with
 * X-Forwarded-Proto/-Host (their first entries, what the proxy nearest the client saw) honoured only
 * when the socket's peer is one of our proxies (TRUST_PROXY), as for X-Forwarded-For.
 */
export function baseUrl(request: Request, config: LinkOrigin, peer: string | undefined): string {
  if (config.publicUrl) return config.publicUrl;
  if (!peerIsProxy(config.trustProxy, peer)) return ownOrigin(request.url);
  const url = new URL(request.url);
  const proto = request.headers.get('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase();
  const host = request.headers.get('x-forwarded-host')?.split(',')[0]?.trim();
  if (proto === 'http' || proto === 'https') url.protocol = `${proto}:`;
  if (host && /^[A-Za-z0-9.\-:[\]]+$/.test(host)) {
    // Read on its own: setting url.host to a value URL cannot read is silently ignored, not an error.
    const origin = `${url.protocol}//${host}`;
    const forwarded = URL.canParse(origin) ? new URL(origin) : undefined;
    if (forwarded) {
      url.hostname = forwarded.hostname;
      // The forwarded host's own port, or none (the protocol's default).
      url.port = forwarded.port;
    }
  }
  return checkedOrigin(url.origin);
}

function checkedOrigin(origin: string): string {
  if (origin.length > MAX_ORIGIN_LENGTH) {
    throw invalidParameter('Host', `makes links start with ${origin.length} characters; at most ${MAX_ORIGIN_LENGTH} are allowed`);
  }
  return origin;
}

/**
 * The origin of a scheme and host as URL reads it, remembered for the last 64: a client names one for all its
 * requests.
 */
const originOf = remembered(64, (authority: string): string => checkedOrigin(new URL(authority).origin));

/** The origin of a request's own URL (scheme and Host), read by URL once for each scheme and host. */
function ownOrigin(href: string): string {
  const end = href.indexOf('/', href.indexOf('//') + 2);
  return originOf(end === -1 ? href : href.slice(0, end));
}
