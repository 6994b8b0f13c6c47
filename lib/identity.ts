// Who a request is for the rate limit (SPEC.md 5): an API key, or else the client's address.
import { createHash } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';

/** What the Authorization header says. Anything present but not a Bearer key is `malformed`. */
export type Credential =
  | { readonly kind: 'none' }
  | { readonly kind: 'key'; readonly hash: Buffer }
  | { readonly kind: 'malformed' };

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

/** An IPv6 address as eight 16-bit groups, or undefined when it is not one. */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.replace(/%.*$/, ''); // a zone id ("fe80::1%eth0") names a local interface
  if (!isIPv6(text)) return undefined;
  // An embedded IPv4 tail ("::ffff:1.2.3.4") becomes two groups.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const front = parse(head);
  const back = tail === undefined ? [] : parse(tail);
  const groups = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

/**
 * The rate-limit subject of an address: an IPv4 address as it is, an IPv6 address by its /64 prefix
 * (one subscriber usually holds a whole /64, so counting single addresses would let a client rotate
 * through 2^64 allowances), an IPv4-mapped IPv6 address as the IPv4 address. Undefined when the text
 * is not an IP address.
 */
export function addressSubject(address: string): string | undefined {
  const trimmed = address.trim();
  if (isIPv4(trimmed)) return trimmed;
  const groups = ipv6Groups(trimmed.replace(/^\[(.*)\]$/, '$1'));
  if (!groups) return undefined;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    const [hi, lo] = [groups[6]!, groups[7]!];
    return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/**
 * The client's address: the socket's, or under TRUST_PROXY the last X-Forwarded-For entry, the one
 * the proxy in front of us appended (entries further left were written by the client and can be
 * anything). A missing or unusable value falls back to the socket, then to "unknown".
 */
export function clientSubject(
  socketAddress: string | undefined,
  forwardedFor: string | undefined,
  trustProxy: boolean,
): string {
  if (trustProxy && forwardedFor) {
    const last = forwardedFor.split(',').at(-1);
    const subject = last === undefined ? undefined : addressSubject(last);
    if (subject) return subject;
  }
  return (socketAddress && addressSubject(socketAddress)) || 'unknown';
}
