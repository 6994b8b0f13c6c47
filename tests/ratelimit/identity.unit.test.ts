// Who a request is for the rate limit, without a database: the API key it carries, or the client's address.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import t from 'tap';
import { peerIsProxy, type TrustProxy, trustFunction } from '../../lib/http/forwarding.ts';
import { addressSubject, clientSubject, hashKey, KEY_PREFIX, parseAuthorization } from '../../lib/ratelimit/identity.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { invalidParameter, problemOf } from '../helpers/problem.ts';

const trust = (value: string): TrustProxy => parseConfig({ TRUST_PROXY: value }).trustProxy;
const key = `${KEY_PREFIX}aZ09-_${'x'.repeat(26)}`;

t.test('parseAuthorization: a well-formed key is looked up by the SHA-256 of the key, not of the header', async (t) => {
  const expected = createHash('sha256').update(key).digest();
  for (const header of [`Bearer ${key}`, `bearer ${key}`, `BEARER   ${key}  `]) {
    const credential = parseAuthorization(header);
    t.equal(credential.kind, 'key', header);
    t.same(credential.kind === 'key' ? credential.hash : undefined, expected, `${header}: the hash of the key`);
  }
  t.same(hashKey(key), expected);
  const other = parseAuthorization(`Bearer ${key.slice(0, -1)}y`);
  t.equal(other.kind, 'key');
  t.notSame(other.kind === 'key' ? other.hash : undefined, expected, 'another key, another hash');
});

t.test('parseAuthorization: every key, sent again, is looked up by its own hash, however many keys came between', async (t) => {
  // The digests of keys sent lately are kept, a bounded number of them: more keys than are kept, sent twice over.
  const keys = Array.from({ length: 25_000 }, (_, i) => `${KEY_PREFIX}${String(i).padStart(32, 'k')}`);
  for (const round of [1, 2]) {
    let wrong = 0;
    for (const sent of keys) {
      const credential = parseAuthorization(`Bearer ${sent}`);
      if (credential.kind !== 'key' || !credential.hash.equals(createHash('sha256').update(sent).digest())) wrong++;
    }
    t.equal(wrong, 0, `round ${round}: no key answered with another's hash`);
  }
});

t.test('parseAuthorization: no header is anonymous; anything present but not a Bearer key of the issued format is malformed', async (t) => {
  t.same(parseAuthorization(undefined), { kind: 'none' });
  const body = 'a'.repeat(32);
  for (const header of [
    `Bearer PCK_${body}`,
    `Bearer pck-${body}`,
    `Bearer pck_${body}a`,
    `Bearer pck_${body.slice(1)}`,
    `Bearer pck_${body.slice(1)}=`,
    `Bearer pck_${body.slice(1)}.`,
    `Bearer pck_${body.slice(1)}+`,
    `Bearer pck_${body.slice(1)}/`,
    `Bearer ${body}`,
    `Bearer\tpck_${body}`,
    `pck_${body}`,
    `Basic pck_${body}`,
    `Bearer pck_${body}, Bearer pck_${body}`,
    ' ',
  ]) {
    t.same(parseAuthorization(header), { kind: 'malformed' }, JSON.stringify(header));
  }
});

t.test('addressSubject: the usual spellings only, IPv6 by its /64', async (t) => {
  const cases: [string, string | undefined][] = [
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    [' 198.51.100.4\t', '198.51.100.4'],
    ['::ffff:c633:6404', '198.51.100.4'],
    ['2001:DB8:A::1', '2001:db8:a:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    ['::', '0:0:0:0::/64'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff::/64'],
    ['01.2.3.4', undefined],
    ['1.2.3.04', undefined],
    ['256.0.0.1', undefined],
    ['1.2.3.4.5', undefined],
    ['2001:db8::/64', undefined],
    ['2001:db8:1:2:3:4:5:6:7', undefined],
    ['0x7f000001', undefined],
  ];
  for (const [address, subject] of cases) t.equal(addressSubject(address), subject, JSON.stringify(address));
});

t.test('property: IPv4 addresses are their own subject; IPv6 addresses share one exactly when their first 64 bits agree', async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(fc.ipV4(), (address) => addressSubject(address) === address),
      { numRuns: 300 },
    ),
  );
  const group = fc.integer({ min: 0, max: 0xffff });
  const groups = fc.array(group, { minLength: 8, maxLength: 8 });
  const text = (parts: number[]) => parts.map((part) => part.toString(16)).join(':');
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(groups, groups, (a, b) => {
        // ::ffff:0:0/96 is IPv4-mapped, counted as IPv4.
        fc.pre(!(a.slice(0, 5).every((g) => g === 0) && a[5] === 0xffff) && !(b.slice(0, 5).every((g) => g === 0) && b[5] === 0xffff));
        const sameTop = a.slice(0, 4).join() === b.slice(0, 4).join();
        const subjectA = addressSubject(text(a));
        return (
          subjectA === `${text(a.slice(0, 4))}::/64` &&
          (subjectA === addressSubject(text(b))) === sameTop &&
          addressSubject(text([...a.slice(0, 4), ...b.slice(4)])) === subjectA
        );
      }),
      { numRuns: 500 },
    ),
  );
});

t.test('clientSubject, no trusted proxy: the socket peer, whatever X-Forwarded-For says', async (t) => {
  const none = trust('false');
  t.same(none, { kind: 'none' });
  t.equal(clientSubject('203.0.113.7', '198.51.100.1', none), '203.0.113.7');
  t.equal(clientSubject('2001:db8:1:2::7', undefined, none), '2001:db8:1:2::/64');
  t.equal(clientSubject(undefined, '198.51.100.1', none), 'unknown', 'no socket: one shared subject');
  t.equal(clientSubject('not an address', undefined, none), 'unknown');
  t.equal(clientSubject('203.0.113.7', 'garbage', none), '203.0.113.7', 'junk from anyone untrusted is never read');
  t.notOk(peerIsProxy(none, '127.0.0.1'));
});

t.test('clientSubject, a hop count: the peer and the entries nearest it, that many hops in all, are our proxies', async (t) => {
  const one = trust('1');
  const three = trust('3');
  t.same(three, { kind: 'hops', hops: 3 });
  t.equal(clientSubject('10.0.0.1', '198.51.100.1, 198.51.100.2', one), '198.51.100.2');
  t.equal(clientSubject('10.0.0.1', '198.51.100.1, 198.51.100.2, 198.51.100.3', three), '198.51.100.1');
  t.equal(clientSubject('10.0.0.1', '198.51.100.0,198.51.100.1,198.51.100.2,198.51.100.3', three), '198.51.100.1', 'without spaces');
  t.equal(
    clientSubject('10.0.0.1', 'garbage, 198.51.100.0, 198.51.100.1, 198.51.100.2', three),
    '198.51.100.0',
    'what lies beyond the client is not read',
  );
  t.equal(clientSubject('10.0.0.1', '2001:db8:9:9::1', one), '2001:db8:9:9::/64');
  t.equal(clientSubject('10.0.0.1', undefined, one), '10.0.0.1', 'no header: the peer');
  t.equal(clientSubject('10.0.0.1', '', one), '10.0.0.1', 'an empty header: the peer');
  t.equal(clientSubject(undefined, ' , ,', one), 'unknown', 'only commas and spaces, no socket: unknown, not a 400');
  t.equal(clientSubject(undefined, '198.51.100.9', one), '198.51.100.9', 'no socket (app.request): the hop count still applies');
  t.ok(peerIsProxy(one, undefined));
  for (const junk of ['198.51.100.1, nope', '198.51.100.1:8080', 'unknown', '"198.51.100.1"']) {
    t.same(
      problemOf(() => clientSubject('10.0.0.1', junk, one)),
      invalidParameter(
        'X-Forwarded-For',
        `has an entry from a trusted proxy that is not an IP address: ${JSON.stringify(junk.split(',').at(-1)!.trim())}`,
      ),
      junk,
    );
  }
  const long = `x${'y'.repeat(100)}`;
  t.same(
    problemOf(() => clientSubject('10.0.0.1', long, one)),
    invalidParameter(
      'X-Forwarded-For',
      `has an entry from a trusted proxy that is not an IP address: ${JSON.stringify(long.slice(0, 60))}`,
    ),
    'quoted, at most 60 characters',
  );
});

t.test('clientSubject, addresses: named ranges, CIDRs and single addresses; a chain of proxies all ours gives the leftmost', async (t) => {
  const local = trust('loopback, uniquelocal');
  t.equal(clientSubject('127.0.0.1', '198.51.100.1', local), '198.51.100.1', 'loopback');
  t.equal(clientSubject('::1', '198.51.100.1', local), '198.51.100.1', 'IPv6 loopback');
  t.equal(clientSubject('192.168.1.1', '10.1.1.1, 198.51.100.1, 172.16.0.1', local), '198.51.100.1', 'private ranges skipped');
  t.equal(clientSubject('fd00::1', '198.51.100.1', local), '198.51.100.1', 'fc00::/7');
  t.equal(clientSubject('10.0.0.1', '10.0.0.5, 10.0.0.6', local), '10.0.0.5', 'every hop ours: the furthest one');
  t.equal(clientSubject('198.51.100.2', '203.0.113.1', local), '198.51.100.2', 'a public peer is the client');
  const single = trust('198.51.100.10');
  t.equal(clientSubject('198.51.100.10', '203.0.113.1', single), '203.0.113.1');
  t.equal(clientSubject('198.51.100.100', '203.0.113.1', single), '198.51.100.100', 'no prefix matching on text');
  t.equal(clientSubject(undefined, '203.0.113.1', single), 'unknown', 'no socket: not a proxy');
  t.notOk(peerIsProxy(single, undefined));
  t.ok(peerIsProxy(single, '198.51.100.10'));
  t.ok(peerIsProxy(single, '::ffff:198.51.100.10'), 'IPv4-mapped');
});

t.test('trustFunction: compiled once per setting; a hop count trusts the nearest hops', async (t) => {
  const setting = trust('10.0.0.0/8');
  t.equal(trustFunction(setting), trustFunction(setting));
  t.ok(trustFunction(setting)('10.2.3.4', 5));
  t.notOk(trustFunction(setting)('11.0.0.1', 0));
  const two = trustFunction(trust('2'));
  t.same(
    [0, 1, 2, 3].map((i) => two('203.0.113.1', i)),
    [true, true, false, false],
  );
  t.notOk(trustFunction(trust('off'))('127.0.0.1', 0));
});
