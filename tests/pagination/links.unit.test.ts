// Links, without a database: hrefs built from the request's own query, the body's _links, the RFC 8288 Link header.
import fc from 'fast-check';
import t from 'tap';
import { hasControlCharacter } from '../../lib/http/text.ts';
import { linkBuilder, linkHeader, linksObject } from '../../lib/pagination/links.ts';
import { MAX_LINK_QUERY_LENGTH, parseQueryString, rawQueryOf } from '../../lib/pagination/params.ts';

const URL_ = 'https://api.example.com/v1/products';

t.test('linkBuilder: the variant parameters first, then the filters, sort and count as sent, in request order', async (t) => {
  const params = parseQueryString('category[in]=toys,books&limit=5&sort=-priceCents,name&offset=40&count=none&name[prefix]=Fine');
  const href = linkBuilder(URL_, params);
  t.equal(
    href({ limit: 5, offset: 45 }),
    `${URL_}?limit=5&offset=45&category%5Bin%5D=toys,books&sort=-priceCents,name&count=none&name%5Bprefix%5D=Fine`,
  );
  t.equal(
    href({ offset: 0, limit: '5' }),
    `${URL_}?offset=0&limit=5&category%5Bin%5D=toys,books&sort=-priceCents,name&count=none&name%5Bprefix%5D=Fine`,
    'in the order given, numbers or text',
  );
  t.equal(href({}), `${URL_}?category%5Bin%5D=toys,books&sort=-priceCents,name&count=none&name%5Bprefix%5D=Fine`);
  t.equal(linkBuilder(URL_, new Map())({}), URL_, 'nothing at all: the bare collection URL');
  t.equal(linkBuilder(URL_, new Map())({ 'page-size': 20 }), `${URL_}?page-size=20`);
});

t.test('linkBuilder: every position parameter of the request is dropped, whatever the link writes instead', async (t) => {
  const params = parseQueryString(
    'limit=5&offset=10&page=2&page-size=7&cursor=v1.a.b&since_id=3&before=2026-01-01T00:00:00Z&after=x&status=paid',
  );
  t.equal(linkBuilder(URL_, params)({ 'page-size': 7 }), `${URL_}?page-size=7&status=paid`);
  t.equal(linkBuilder(URL_, params)({}), `${URL_}?status=paid`);
});

t.test('linkBuilder: names and values are written percent-encoded, "[" "]" too (curl globs them), "," left readable', async (t) => {
  const params = new Map([
    ['name', 'a b+c&d=e#f%g/h?i'],
    ['category[in]', 'été,😀'],
    ['type', '<x>"y"'],
  ]);
  t.equal(
    linkBuilder(URL_, params)({ limit: 1 }),
    `${URL_}?limit=1&name=a%20b%2Bc%26d%3De%23f%25g%2Fh%3Fi&category%5Bin%5D=%C3%A9t%C3%A9,%F0%9F%98%80&type=%3Cx%3E%22y%22`,
  );
  t.equal(linkBuilder(URL_, new Map())({ cursor: 'v1.ab_-.cd' }), `${URL_}?cursor=v1.ab_-.cd`, 'a cursor is written as it is');
});

t.test('property: a link reads back as its variant parameters plus what the request carried, and holds only URI characters', async (t) => {
  const text = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }).filter((s) => !hasControlCharacter(s));
  const carried = fc.uniqueArray(
    fc.tuple(
      text.filter((name) => !['limit', 'offset', 'page', 'page-size', 'cursor', 'since_id', 'before', 'after'].includes(name)),
      text,
    ),
    {
      selector: ([name]) => name,
      maxLength: 4,
    },
  );
  const positions = fc.uniqueArray(fc.tuple(fc.constantFrom('limit', 'offset', 'page', 'page-size', 'cursor', 'since_id'), fc.nat()), {
    selector: ([name]) => name,
    maxLength: 3,
  });
  // RFC 3986 URI characters, none of which ends the <…> of a Link header or splits its list.
  const uri = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/;
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(carried, positions, (pairs, own) => {
        const query = pairs.map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`).join('&');
        fc.pre(query.length < MAX_LINK_QUERY_LENGTH);
        const href = linkBuilder(URL_, parseQueryString(query))(Object.fromEntries(own));
        const back = [...parseQueryString(rawQueryOf(href))];
        return (
          uri.test(href) &&
          !/[<>"\s]/.test(href) &&
          JSON.stringify(back) === JSON.stringify([...own.map(([name, n]) => [name, String(n)]), ...pairs])
        );
      }),
      { numRuns: 500 },
    ),
  );
});

t.test('linksObject: { rel: { href } } in the order given, absent links left out', async (t) => {
  t.same(linksObject({ self: 'a', next: undefined, prev: 'b', first: 'c', last: undefined }), {
    self: { href: 'a' },
    prev: { href: 'b' },
    first: { href: 'c' },
  });
  t.same(Object.keys(linksObject({ self: 'a', next: 'n', prev: 'p' })), ['self', 'next', 'prev']);
  t.same(linksObject({}), {});
  t.same(linksObject({ next: undefined }), {});
});

t.test('linkHeader: RFC 8288 link-values joined by ", ", absent links left out', async (t) => {
  t.equal(
    linkHeader({ self: `${URL_}?limit=5&offset=0`, next: `${URL_}?limit=5&offset=5`, prev: undefined }),
    `<${URL_}?limit=5&offset=0>; rel="self", <${URL_}?limit=5&offset=5>; rel="next"`,
  );
  t.equal(
    linkHeader({ poll: 'https://h/v1/events?page-size=20&cursor=v1.a.b' }),
    '<https://h/v1/events?page-size=20&cursor=v1.a.b>; rel="poll"',
  );
  t.equal(linkHeader({}), '');
  t.equal(linkHeader({ self: undefined, next: undefined }), '');
  // Parsed back with the RFC 8288 grammar, the header gives the same links as the body.
  const links = { self: `${URL_}?category[in]=a,b`, next: `${URL_}?x=%2C%3E`, last: undefined, first: `${URL_}` };
  const parsed = Object.fromEntries(
    [...linkHeader(links).matchAll(/<([^>]*)>; rel="([a-z]+)"(?:, |$)/g)].map((m) => [m[2]!, { href: m[1]! }]),
  );
  t.same(parsed, linksObject(links));
});
