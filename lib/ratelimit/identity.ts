// Who a request is for the rate limit (SPEC.md 5): an API key, or else the client's address.
import { createHash } from 'node:crypto';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import ipaddr from 'ipaddr.js';
import proxyaddr from 'proxy-addr';
import { invalidParameter } from '../http/errors.ts';

/** What the Authorization header says. Anything present but not a Bearer key is `malformed`. */
export type Credential =
  | { readonly kind: 'none' }
  | { readonly kind: 'key'; readonly hash: Buffer }
  | { readonly kind: 'malformed' };

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

/** The key format issued by POST /v1/keys: a recognisable prefix, then 32 base64url characters. */
export const KEY_PREFIX = 'pck_';
const KEY_PATTERN = /^pck_[A-Za-z0-9_-]{32}$/;

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** `Authorization: Bearer <key>`; the scheme is case-insensitive (RFC 9110), the key is not. */
export function parseAuthorization(header: string | undefined): Credential {
  if (header === undefined) return { kind: 'none' };
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match || !KEY_PATTERN.test(match[1]!)) return { kind: 'malformed' };
  return { kind: 'key', hash: hashKey(match[1]!) };
}

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

/**
 * The rate-limit subject of an address: an IPv4 address as it is, an IPv6 address by its /64 prefix
 * (one subscriber usually holds a whole /64, so counting single addresses would let a client rotate
 * through 2^64 allowances), an IPv4-mapped IPv6 address as the IPv4 address. Undefined when the text
 * is not an IP address.
 */
export function addressSubject(address: string): string | undefined {
  const text = address.trim();
  // Only the usual spellings: ipaddr.js would also read "1" or "0x7f.1" as IPv4 addresses.
  if (!ipaddr.IPv4.isValidFourPartDecimal(text) && !ipaddr.IPv6.isValid(text)) return undefined;
  const ip = ipaddr.process(text); // IPv4-mapped IPv6 becomes IPv4
  if (ip.kind() === 'ipv4') return ip.toString();
  const groups = (ip as ipaddr.IPv6).parts.slice(0, 4).map((group) => group.toString(16));
  return `${groups.join(':')}::/64`;
}

/**
 * The client's address (proxy-addr semantics): walking X-Forwarded-For from its right end, every
 * entry written by one of our proxies is skipped; the first one that is not ours is the client. A
 * peer that is not our proxy is the client itself, whatever its X-Forwarded-For says. An entry that
 * a trusted proxy passed on but that is not an IP address is a 400 naming the header: the client
 * cannot be told, and charging the proxy's own address would make every client behind it pay.
 */
export function clientSubject(peer: string | undefined, forwardedFor: string | undefined, trust: TrustProxy): string {
  const peerSubject = (peer && addressSubject(peer)) || 'unknown';
  if (!forwardedFor || !peerIsProxy(trust, peer)) return peerSubject;
  // proxy-addr reads a request; only these two fields of it.
  const request = { headers: { 'x-forwarded-for': forwardedFor }, socket: { remoteAddress: peer ?? '' } };
  const addresses = proxyaddr.all(request as unknown as Parameters<typeof proxyaddr.all>[0], trustFunction(trust));
  if (addresses.length === 1) return peerSubject; // an X-Forwarded-For of only spaces and commas
  const client = addresses.at(-1)!;
  const subject = addressSubject(client);
  if (subject === undefined) {
    throw invalidParameter('X-Forwarded-For', `has an entry from a trusted proxy that is not an IP address: ${JSON.stringify(client.slice(0, 60))}`);
  }
  return subject;
}
