// The query string, without a database: parsing, the two length bounds, integers and sizes, link encoding.
import fc from 'fast-check';
import t from 'tap';
import { hasControlCharacter } from '../../lib/http/text.ts';
import {
  encodeQueryComponent,
  MAX_LINK_QUERY_LENGTH,
  MAX_QUERY_LENGTH,
  MAX_SAFE,
  parseInteger,
  parseQueryString,
  parseSize,
  rawQueryOf,
} from '../../lib/pagination/params.ts';
import { invalidParameter, problemOf } from '../helpers/problem.ts';

const entries = (raw: string) => [...parseQueryString(raw)];
const hex = (code: number) => `%${code.toString(16).toUpperCase().padStart(2, '0')}`;

t.test('the bounds are the documented ones', async (t) => {
  t.equal(MAX_QUERY_LENGTH, 4096);
  t.equal(MAX_LINK_QUERY_LENGTH, 1024);
  t.equal(MAX_SAFE, 2 ** 53 - 1);
});

t.test('parseQueryString: names and values are decoded, order is kept, empty pieces are no parameter', async (t) => {
  t.same(entries(''), []);
  t.same(entries('&&&'), []);
  t.same(
    entries('b=2&&a=1&'),
    [
      ['b', '2'],
      ['a', '1'],
    ],
    'request order, stray & skipped',
  );
  t.same(entries('name=a+b'), [['name', 'a b']], '+ is a space');
  t.same(entries('name=a%2Bb'), [['name', 'a+b']], '%2B is a plus');
  t.same(entries('na+me=x'), [['na me', 'x']], '+ in a name too');
  t.same(entries('%6Eame=%C3%A9t%C3%A9'), [['name', 'été']]);
  t.same(entries('sort=a=b'), [['sort', 'a=b']], 'the value runs from the first =');
  t.same(entries('category[in]=a,b'), [['category[in]', 'a,b']]);
  t.same(entries('category%5Bin%5D=a%2Cb'), [['category[in]', 'a,b']], 'encoded brackets and commas are the same parameter');
  t.same(entries('name=%C2%80%F0%9F%98%80~'), [['name', '\u0080😀~']], 'U+0080 and beyond are not control characters here');
});

t.test('parseQueryString: empty, nameless and repeated parameters are a 400 naming them', async (t) => {
  t.same(
    problemOf(() => parseQueryString('limit=')),
    invalidParameter('limit', 'must not be empty'),
  );
  t.same(
    problemOf(() => parseQueryString('a=1&limit')),
    invalidParameter('limit', 'must not be empty'),
    'no = at all',
  );
  t.same(
    problemOf(() => parseQueryString('=5')),
    invalidParameter('(empty name)', 'has no name'),
  );
  t.same(
    problemOf(() => parseQueryString('a=1&=')),
    invalidParameter('(empty name)', 'has no name'),
  );
  t.same(
    problemOf(() => parseQueryString('a=1&b=2&a=1')),
    invalidParameter('a', 'must not be repeated'),
    'even with the same value',
  );
  t.same(
    problemOf(() => parseQueryString('limit=1&%6Cimit=2')),
    invalidParameter('limit', 'must not be repeated'),
    'spelled differently, decoded the same',
  );
  t.same(
    problemOf(() => parseQueryString('a+b=1&a%20b=2')),
    invalidParameter('a b', 'must not be repeated'),
  );
  t.same(
    problemOf(() => parseQueryString('a=1&a=')),
    invalidParameter('a', 'must not be repeated'),
    'a repeat is named before its empty value',
  );
  t.same(
    problemOf(() => parseQueryString('a=&a=1')),
    invalidParameter('a', 'must not be empty'),
    'the first offence wins',
  );
});

t.test('parseQueryString: bad percent-encoding is a 400 naming the parameter as far as it can be read', async (t) => {
  for (const value of ['%ZZ', '%', '%4', 'a%', '%E0%A4%A', '%C0%AF', '%ED%A0%80', '%FF', '%80']) {
    t.same(
      problemOf(() => parseQueryString(`%6Eame=${value}`)),
      invalidParameter('name', 'is not valid percent-encoding'),
      `value ${value}`,
    );
  }
  for (const name of ['%ZZ', '%', 'a%C0%AF']) {
    t.same(
      problemOf(() => parseQueryString(`${name}=1`)),
      invalidParameter(name, 'is not valid percent-encoding'),
      `name ${name}: named raw`,
    );
  }
});

t.test('parseQueryString: a control character in a name is a 400 naming the parameter as sent', async (t) => {
  const reason = 'must not contain a NUL or other control character in its name';
  for (const code of [...Array.from({ length: 32 }, (_, code) => code), 127]) {
    t.same(
      problemOf(() => parseQueryString(`li${hex(code)}mit=1`)),
      invalidParameter(`li${hex(code)}mit`, reason),
      hex(code),
    );
  }
});

t.test('parseQueryString: every C0 control character and DEL in a value is a 400, encoded or raw', async (t) => {
  const reason = 'must not contain a NUL or other control character';
  const controls = [...Array.from({ length: 32 }, (_, code) => code), 127];
  for (const code of controls) {
    t.same(
      problemOf(() => parseQueryString(`name=a${hex(code)}b`)),
      invalidParameter('name', reason),
      hex(code),
    );
  }
  t.same(
    problemOf(() => parseQueryString('name=a\tb')),
    invalidParameter('name', reason),
    'a raw tab',
  );
  t.same(
    problemOf(() => parseQueryString(`name=${String.fromCharCode(0)}`)),
    invalidParameter('name', reason),
    'a raw NUL',
  );
  t.same(entries('name=%20%7E'), [['name', ' ~']], 'the neighbours of the range are taken');
});

t.test('parseQueryString: a name reads the same every time, however many other names were read between', async (t) => {
  // Names are read once and kept, a bounded number of them: more names than are kept, read twice over, each
  // time with the values and link lengths of that request, and a refused name refused on every request.
  const names = Array.from({ length: 2500 }, (_, i) => `f${i}%5Bgte%5D`);
  for (const round of [1, 2]) {
    for (const [i, name] of names.entries()) {
      if (i % 250 !== 0) {
        parseQueryString(`${name}=${round}`);
        continue;
      }
      t.same(
        entries(`${name}=${round}&limit=5`),
        [
          [`f${i}[gte]`, String(round)],
          ['limit', '5'],
        ],
        `${name}, round ${round}`,
      );
      t.same(
        problemOf(() => parseQueryString(`a%ZZ=${round}`)),
        invalidParameter('a%ZZ', 'is not valid percent-encoding'),
      );
      t.same(
        problemOf(() => parseQueryString(`${name}=`)),
        invalidParameter(`f${i}[gte]`, 'must not be empty'),
      );
    }
  }
  // The link bound counts the name as links write it each time it is read again.
  const name = `${'n'.repeat(500)}%5B`;
  const value = 'v'.repeat(MAX_LINK_QUERY_LENGTH - 500 - 3 - 1);
  t.same(entries(`${name}=${value}`), [[`${'n'.repeat(500)}[`, value]]);
  t.same(entries(`${name}=${value}`), [[`${'n'.repeat(500)}[`, value]], 'read again, still at the bound');
  t.same(
    problemOf(() => parseQueryString(`${name}=${value}v`)),
    invalidParameter(
      `${'n'.repeat(500)}[`,
      `makes the filters, sort and count, as links write them, ${MAX_LINK_QUERY_LENGTH + 1} characters long; at most ${MAX_LINK_QUERY_LENGTH} are allowed`,
    ),
    'one more character, refused, naming the longest parameter',
  );
});

t.test('the raw bound: 4096 characters of query without its cursor, checked before decoding, naming the longest piece', async (t) => {
  const offset = (length: number) => `offset=${'0'.repeat(length - 'offset='.length)}`;
  t.equal(offset(4096).length, 4096);
  t.equal(parseQueryString(offset(4096)).get('offset')!.length, 4089, 'at the bound: taken (its value is another matter)');
  t.same(
    problemOf(() => parseQueryString(offset(4097))),
    invalidParameter('offset', 'makes the query string without its cursor 4097 characters long; at most 4096 are allowed'),
  );
  const cursor = `cursor=${'c'.repeat(9000)}`;
  t.equal(parseQueryString(`${cursor}&${offset(4096)}`).size, 2, 'a cursor and its & do not count');
  t.equal(parseQueryString(`${offset(4096)}&${cursor}`).size, 2, 'wherever the cursor stands');
  t.same(
    problemOf(() => parseQueryString(`${cursor}&${offset(4097)}`)),
    invalidParameter('offset', 'makes the query string without its cursor 4097 characters long; at most 4096 are allowed'),
  );
  t.same(
    problemOf(() => parseQueryString(`page-size=${'1'.repeat(2000)}&${offset(2107)}`)),
    invalidParameter('offset', 'makes the query string without its cursor 4118 characters long; at most 4096 are allowed'),
    'the longest piece is named, not the first',
  );
  t.same(
    problemOf(() => parseQueryString(`${offset(4095)}&%ZZ`)),
    invalidParameter('offset', 'makes the query string without its cursor 4099 characters long; at most 4096 are allowed'),
    'too long is said before the bad encoding is read',
  );
  const longName = 'x'.repeat(5000);
  t.same(
    problemOf(() => parseQueryString(`${longName}=1`)),
    invalidParameter('x'.repeat(100), 'makes the query string without its cursor 5002 characters long; at most 4096 are allowed'),
    'a long name is named by its first 100 characters',
  );
});

t.test('the link bound: 1024 characters of filters, sort and count as links write them', async (t) => {
  const reason = (length: number) =>
    `makes the filters, sort and count, as links write them, ${length} characters long; at most 1024 are allowed`;
  // "sort=-name" and "count=none" are 10 each, two & join three parameters: 22, so a 1002-character filter fits.
  const withFilter = (commas: number) => `sort=-name&count=none&category[in]=${','.repeat(commas)}`;
  t.equal(
    parseQueryString(withFilter(1002 - 'category%5Bin%5D='.length)).size,
    3,
    '1024 as links write them: "," counts 1, "[" and "]" 3 each (%5B, %5D)',
  );
  t.same(
    problemOf(() => parseQueryString(withFilter(1003 - 'category%5Bin%5D='.length))),
    invalidParameter('category[in]', reason(1025)),
  );
  // A plus is a space, which links write as %20: three characters each.
  t.equal(parseQueryString(`name=${'+'.repeat(339)}a`).get('name')!.length, 340, '5 + 3 × 339 + 1 = 1023');
  t.same(
    problemOf(() => parseQueryString(`name=${'+'.repeat(340)}`)),
    invalidParameter('name', reason(1025)),
  );
  // The longest as links write them, not as sent: 600 letters are 602, 500 pluses are 1502.
  t.same(
    problemOf(() => parseQueryString(`a=${'x'.repeat(600)}&b=${'+'.repeat(500)}`)),
    invalidParameter('b', reason(2105)),
  );
  t.same(
    problemOf(() => parseQueryString(`%6Eame=${'%C3%A9'.repeat(200)}`)),
    invalidParameter('name', reason(1205)),
    'named decoded',
  );
  // Position parameters are written by each link itself: they do not count.
  for (const name of ['limit', 'offset', 'page', 'page-size', 'cursor', 'since_id', 'before', 'after']) {
    t.equal(parseQueryString(`${name}=${'+'.repeat(1300)}`).get(name)!.length, 1300, `${name} is not carried into links`);
  }
});

t.test('rawQueryOf: the text between ? and #, undecoded', async (t) => {
  t.equal(rawQueryOf('http://h.test/v1/products'), '');
  t.equal(rawQueryOf('http://h.test/v1/products?'), '');
  t.equal(rawQueryOf('http://h.test/v1/products?a=1&b=%20'), 'a=1&b=%20');
  t.equal(rawQueryOf('http://h.test/v1/products?a=1#frag'), 'a=1');
  t.equal(rawQueryOf('http://h.test/v1/products?#frag'), '');
  t.equal(rawQueryOf('http://h.test/v1/products?a=1?b=2'), 'a=1?b=2', 'a second ? belongs to the query');
});

t.test('parseInteger: plain decimal digits within the bounds, leading zeros allowed, at most 20 digits', async (t) => {
  t.equal(parseInteger('n', '0', 0, 10), 0);
  t.equal(parseInteger('n', '10', 0, 10), 10);
  t.equal(parseInteger('n', '007', 0, 10), 7);
  t.equal(parseInteger('n', `${'0'.repeat(19)}7`, 0, 10), 7, '20 digits');
  t.equal(parseInteger('n', '-5', -5, 5), -5);
  t.equal(parseInteger('n', '9007199254740991', 0, MAX_SAFE), MAX_SAFE);
  t.equal(parseInteger('n', '-9007199254740991', -MAX_SAFE, MAX_SAFE), -MAX_SAFE);
  const bad: [string, number, number][] = [
    ['11', 0, 10],
    ['-1', 0, 10],
    ['-6', -5, 5],
    ['6', -5, 5],
    [`${'0'.repeat(20)}7`, 0, 10],
    ['', 0, 10],
    ['-', -5, 5],
    ['--1', -5, 5],
    ['+1', 0, 10],
    [' 1', 0, 10],
    ['1 ', 0, 10],
    ['1.0', 0, 10],
    ['1e1', 0, 10],
    ['0x1', 0, 10],
    ['１', 0, 10],
    ['١', 0, 10],
    ['9007199254740992', 0, MAX_SAFE],
    ['-9007199254740992', -MAX_SAFE, MAX_SAFE],
    ['99999999999999999999', 0, MAX_SAFE],
  ];
  for (const [value, min, max] of bad) {
    t.same(
      problemOf(() => parseInteger('n', value, min, max)),
      invalidParameter('n', `must be an integer from ${min} to ${max}`),
      `${JSON.stringify(value)} in [${min}, ${max}]`,
    );
  }
});

t.test('parseSize: the default when absent, else 1 … max, named by its own parameter', async (t) => {
  const pageSize = { default: 20, max: 100 };
  t.equal(parseSize(new Map(), 'limit', pageSize), 20);
  t.equal(parseSize(new Map([['page-size', '5']]), 'limit', pageSize), 20, 'only its own parameter counts');
  t.equal(parseSize(new Map([['limit', '005']]), 'limit', pageSize), 5);
  t.equal(parseSize(new Map([['page-size', '0100']]), 'page-size', pageSize), 100);
  t.same(
    problemOf(() => parseSize(new Map([['page-size', '0']]), 'page-size', pageSize)),
    invalidParameter('page-size', 'must be an integer from 1 to 100'),
  );
  t.same(
    problemOf(() => parseSize(new Map([['limit', '101']]), 'limit', pageSize)),
    invalidParameter('limit', 'must be an integer from 1 to 100'),
  );
});

t.test('property: parseSize takes exactly the strings of at most 20 decimal digits whose value is within 1 … max', async (t) => {
  const value = fc.oneof(
    fc.tuple(fc.nat(22), fc.nat(300)).map(([zeros, n]) => '0'.repeat(zeros) + String(n)),
    fc.integer({ min: -300, max: 300 }).map(String),
    fc.constantFrom('', '+5', ' 5', '5 ', '5.0', '1e2', '0x10', '５', '9007199254740993', '-0', '٣'),
    fc.string({ maxLength: 6 }),
  );
  const accepts = (text: string, max: number) => /^[0-9]{1,20}$/.test(text) && BigInt(text) >= 1n && BigInt(text) <= BigInt(max);
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(value, fc.integer({ min: 1, max: 1000 }), (text, max) => {
        const pageSize = { default: 20, max };
        const actual = problemOf(() => parseSize(new Map([['limit', text]]), 'limit', pageSize));
        if (!accepts(text, max))
          return JSON.stringify(actual) === JSON.stringify(invalidParameter('limit', `must be an integer from 1 to ${max}`));
        return actual === 'no error' && parseSize(new Map([['limit', text]]), 'limit', pageSize) === Number(text);
      }),
      { numRuns: 2000 },
    ),
  );
});

t.test('encodeQueryComponent: percent-encoding that leaves "," readable and encodes "[" "]", which curl globs', async (t) => {
  t.equal(encodeQueryComponent('category[in]'), 'category%5Bin%5D');
  t.equal(encodeQueryComponent('-priceCents,name'), '-priceCents,name');
  t.equal(encodeQueryComponent('a b+c&d=e#f%g'), 'a%20b%2Bc%26d%3De%23f%25g');
  t.equal(encodeQueryComponent('<>"\\^`{|}'), '%3C%3E%22%5C%5E%60%7B%7C%7D');
  t.equal(encodeQueryComponent('été😀'), '%C3%A9t%C3%A9%F0%9F%98%80');
});

t.test('property: what links encode reads back as it was, and only URI characters are written', async (t) => {
  const uriText = /^(?:[A-Za-z0-9\-_.!~*'(),[\]]|%[0-9A-F]{2})*$/;
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 20 }),
        (text) => uriText.test(encodeQueryComponent(text)) && decodeURIComponent(encodeQueryComponent(text)) === text,
      ),
      { numRuns: 1000 },
    ),
  );
  // Names and values without control characters survive a trip through a link and back through the parser.
  const readable = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).filter((s) => !hasControlCharacter(s));
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(readable, readable), { selector: ([name]) => name, maxLength: 5 }), (pairs) => {
        const query = pairs.map(([name, value]) => `${encodeQueryComponent(name)}=${encodeQueryComponent(value)}`).join('&');
        fc.pre(query.length <= MAX_LINK_QUERY_LENGTH); // longer ones are a 400, checked above
        return JSON.stringify(entries(query)) === JSON.stringify(pairs);
      }),
      { numRuns: 500 },
    ),
  );
});
