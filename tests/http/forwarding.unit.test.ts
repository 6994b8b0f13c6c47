// The base of every link, without a database or a server: PUBLIC_URL, or the request's origin with the
// forwarded proto and host of a trusted proxy, bounded in length.
import t from 'tap';
import { baseUrl } from '../../lib/http/forwarding.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { invalidParameter, problemOf } from '../helpers/problem.ts';

const request = (url: string, headers: Record<string, string> = {}) => new Request(url, { headers });
const untrusted = parseConfig({});
const oneHop = parseConfig({ TRUST_PROXY: '1' });
const proxies = parseConfig({ TRUST_PROXY: '10.0.0.0/8' });
const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com' };

t.test('PUBLIC_URL wins over everything, without its trailing slash', async (t) => {
  const config = parseConfig({ PUBLIC_URL: 'https://public.example.com/base/', TRUST_PROXY: '1' });
  t.equal(baseUrl(request('http://internal:3000/v1/products', forwarded), config, '10.0.0.1'), 'https://public.example.com/base');
  t.equal(
    baseUrl(request(`http://${'h'.repeat(400)}/v1`), config, undefined),
    'https://public.example.com/base',
    'the request origin is not even read',
  );
});

t.test('without a trusted peer: the request origin, forwarded headers ignored', async (t) => {
  t.equal(baseUrl(request('http://a.test:8080/v1/products?limit=5', forwarded), untrusted, '10.0.0.1'), 'http://a.test:8080');
  t.equal(baseUrl(request('http://a.test:8080/v1', forwarded), proxies, '192.0.2.1'), 'http://a.test:8080', 'a peer outside TRUST_PROXY');
  t.equal(baseUrl(request('http://a.test:8080/v1', forwarded), proxies, undefined), 'http://a.test:8080', 'no socket, addresses setting');
  t.equal(baseUrl(request('https://A.Test:443/v1'), untrusted, undefined), 'https://a.test', 'the origin as URL writes it');
});

t.test('from a trusted peer: X-Forwarded-Proto and -Host, their first entries', async (t) => {
  t.equal(
    baseUrl(request('http://a.test:8080/v1', forwarded), proxies, '10.1.2.3'),
    'https://api.example.com',
    "the request's port goes with its host",
  );
  t.equal(
    baseUrl(request('http://a.test:8080/v1', forwarded), oneHop, undefined),
    'https://api.example.com',
    'a hop count trusts the peer, socket or not',
  );
  t.equal(baseUrl(request('http://a.test:8080/v1', { 'x-forwarded-host': 'b.test:8443' }), oneHop, '10.0.0.1'), 'http://b.test:8443');
  t.equal(
    baseUrl(request('http://a.test/v1', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'b.test:443' }), oneHop, '10.0.0.1'),
    'https://b.test',
    'a default port is dropped',
  );
  t.equal(
    baseUrl(
      request('http://a.test/v1', { 'x-forwarded-proto': ' HTTPS , http', 'x-forwarded-host': ' b.test , c.test' }),
      oneHop,
      '10.0.0.1',
    ),
    'https://b.test',
  );
  t.equal(
    baseUrl(request('http://a.test/v1', { 'x-forwarded-host': '[2001:db8::1]:9000' }), oneHop, '10.0.0.1'),
    'http://[2001:db8::1]:9000',
  );
  t.equal(baseUrl(request('http://a.test/v1', { 'x-forwarded-host': 'B.Test' }), oneHop, '10.0.0.1'), 'http://b.test');
  t.equal(baseUrl(request('https://a.test/v1', { 'x-forwarded-proto': 'http' }), oneHop, '10.0.0.1'), 'http://a.test', 'proto alone');
});

t.test('from a trusted peer: a proto other than http(s), or a host with other characters, is not taken', async (t) => {
  for (const proto of ['ftp', 'javascript', 'https:', '']) {
    t.equal(
      baseUrl(request('http://a.test:8080/v1', { 'x-forwarded-proto': proto }), oneHop, '10.0.0.1'),
      'http://a.test:8080',
      `proto ${JSON.stringify(proto)}`,
    );
  }
  // '[', 'a:b:c', 'b.test:99999' pass the character check but are no host URL can read: the request's own
  // origin is kept whole, port included.
  for (const host of [
    'evil.test/path',
    'evil.test?x',
    'user@evil.test',
    'evil test',
    'évil.test',
    'evil.test#',
    'evil.test\\x',
    '',
    '[',
    'a:b:c',
    'b.test:99999',
  ]) {
    t.equal(
      baseUrl(request('http://a.test:8080/v1', { 'x-forwarded-host': host }), oneHop, '10.0.0.1'),
      'http://a.test:8080',
      `host ${JSON.stringify(host)}`,
    );
  }
});

t.test('an origin longer than 300 characters is a 400 naming Host, forwarded or not', async (t) => {
  const host = (length: number) => `${'h'.repeat(length - 5)}.test`;
  t.equal(baseUrl(request(`http://${host(293)}/v1`), untrusted, undefined).length, 300, 'at the bound');
  t.same(
    problemOf(() => baseUrl(request(`http://${host(294)}/v1`), untrusted, undefined)),
    invalidParameter('Host', 'makes links start with 301 characters; at most 300 are allowed'),
  );
  t.same(
    problemOf(() =>
      baseUrl(request('http://a.test/v1', { 'x-forwarded-proto': 'https', 'x-forwarded-host': host(293) }), oneHop, '10.0.0.1'),
    ),
    invalidParameter('Host', 'makes links start with 301 characters; at most 300 are allowed'),
    'https:// is one longer',
  );
  t.equal(
    baseUrl(request('http://a.test/v1', { 'x-forwarded-host': host(400) }), untrusted, '10.0.0.1'),
    'http://a.test',
    'an untrusted long header is not read',
  );
});
