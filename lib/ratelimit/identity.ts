// Who a request is for the rate limit (docs/reference/limits.md, "Who is counted"): an API key, or else the client's address.
import ipaddr from 'ipaddr.js';
import proxyaddr from 'proxy-addr';
import { bearerToken, digest } from '../http/bearer.ts';
import { invalidParameter } from '../http/errors.ts';
import { peerIsProxy, type TrustProxy, trustFunction } from '../http/forwarding.ts';
import { remembered } from '../http/remembered.ts';
import { looksLikeJwt } from './tokens.ts';

/** What the Authorization header says. Anything present but not a Bearer key (or a token, when tokens are on) is `malformed`. */
export type Credential =
  | { readonly kind: 'none' }
  | { readonly kind: 'key'; readonly hash: Buffer }
  | { readonly kind: 'token'; readonly token: string }
  | { readonly kind: 'malformed' };

/** The key format issued by POST /v1/keys: a recognisable prefix, then 32 base64url characters. */
export const KEY_PREFIX = 'pck_';
/** What an issued key looks like (and the OpenAPI document says). */
export const KEY_PATTERN = /^pck_[A-Za-z0-9_-]{32}$/;

/** What is stored of a key, and what a request's key is looked up by. */
export const hashKey = digest;

/**
 * hashKey of a key sent with a request, remembered for the last 10,000 keys sent: a client sends its key with
 * every request, and its SHA-256 cost a declined request a noticeable share of its work. Kept in this process
 * only, as every request's header is while it is served; bounded, since anyone may send keys of the right shape.
 */
const sentKeyHash = remembered(10_000, hashKey);

/** `Authorization: Bearer <key>`, or `Bearer <token>` when `tokens` (JWT verification is configured). */
export function parseAuthorization(header: string | undefined, tokens = false): Credential {
  if (header === undefined) return { kind: 'none' };
  const credential = bearerToken(header);
  if (credential !== undefined && KEY_PATTERN.test(credential)) return { kind: 'key', hash: sentKeyHash(credential) };
  if (tokens && credential !== undefined && looksLikeJwt(credential)) return { kind: 'token', token: credential };
  return { kind: 'malformed' };
}

/**
 * The rate-limit subject of an address: an IPv4 address as it is, an IPv6 address by its /64 prefix
 * (one subscriber usually holds a whole /64, so counting single addresses would let a client rotate
 * through 2^64 allowances), an IPv4-mapped IPv6 address as the IPv4 address. Undefined when the text
 * is not an IP address.
 */
function subjectOf(address: string): string | undefined {
  const text = address.trim();
  // Only the usual spellings: ipaddr.js would also read "1" or "0x7f.1" as IPv4 addresses.
  const valid = text.includes(':') ? ipaddr.IPv6.isValid(text) : ipaddr.IPv4.isValidFourPartDecimal(text);
  if (!valid) return undefined;
  const ip = ipaddr.process(text); // IPv4-mapped IPv6 becomes IPv4
  if (ip.kind() === 'ipv4') return ip.toString();
  const groups = (ip as ipaddr.IPv6).parts.slice(0, 4).map((group) => group.toString(16));
  return `${groups.join(':')}::/64`;
}

/**
 * subjectOf, remembered for the last 10,000 addresses seen. Reading an IPv6 address with ipaddr.js is a
 * noticeable share of a request's work (an IPv4-mapped one is what a dual-stack socket reports for every IPv4
 * client); bounded, since the addresses a trusted proxy forwards are the clients' to choose.
 */
export const addressSubject: (address: string) => string | undefined = remembered(10_000, subjectOf);

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
    throw invalidParameter(
      'X-Forwarded-For',
      `has an entry from a trusted proxy that is not an IP address: ${JSON.stringify(client.slice(0, 60))}`,
    );
  }
  return subject;
}
