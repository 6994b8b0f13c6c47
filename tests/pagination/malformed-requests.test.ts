// A table of malformed and conflicting requests: each a 400 problem+json naming the parameter; never a 500.
import t from 'tap';
import { testApp } from '../helpers/app.ts';

// [query on /v1/products unless a path is given, the parameter(s) the error must name]
const cases: [string, string[]][] = [
  ['limit=abc', ['limit']],
  ['limit=-1', ['limit']],
  ['limit=0', ['limit']],
  ['limit=101', ['limit']],
  ['limit=1.5', ['limit']],
  ['limit=1e3', ['limit']],
  ['limit=+5', ['limit']],
  ['limit=%205', ['limit']],
  ['limit=0x10', ['limit']],
  ['limit=99999999999999999999999', ['limit']],
  ['limit=', ['limit']],
  ['limit', ['limit']],
  ['limit=5&limit=6', ['limit']],
  ['offset=-1', ['offset']],
  ['offset=9007199254740992', ['offset']],
  ['offset=1.0', ['offset']],
  ['offset=１２', ['offset']],
  ['page=-1', ['page']],
  ['page=x', ['page']],
  ['page=900719925474099&page-size=100', ['page']],
  ['page=1&page-size=0', ['page-size']],
  ['page=1&page-size=101', ['page-size']],
  ['limit=5&page=1', ['limit', 'page']],
  ['offset=5&page=1', ['offset', 'page']],
  ['limit=5&page-size=5', ['page-size']],
  ['limit=5&cursor=abc', ['limit', 'cursor']],
  ['offset=5&since_id=3', ['offset', 'since_id']],
  ['page=1&after=2026-01-01T00:00:00Z', ['page', 'after']],
  ['count=maybe', ['count']],
  ['count=EXACT', ['count']],
  ['sort=price', ['sort']],
  ['sort=name,name', ['sort']],
  ['sort=name,', ['sort']],
  ['sort=--name', ['sort']],
  ['sort=category', ['sort']],
  ['colour=red', ['colour']],
  ['category[gt]=books', ['category[gt]']],
  ['category[like]=b', ['category[like]']],
  ['category[]=b', ['category[]']],
  ['category[in]=a,,b', ['category[in]']],
  ['category[in]=,', ['category[in]']],
  ['priceCents=ten', ['priceCents']],
  ['priceCents[gt]=2147483648', ['priceCents[gt]']],
  ['priceCents[lt]=1.5', ['priceCents[lt]']],
  ['priceCents[prefix]=1', ['priceCents[prefix]']],
  ['priceCents[in]=1,2', ['priceCents[in]']],
  ['name[PREFIX]=a', ['name[PREFIX]']],
  ['name=%E0%A4%A', ['name']],
  ['name=%ZZ', ['name']],
  ['name=%C0%AF', ['name']],
  ['name=%00', ['name']],
  ['%ZZ=1', ['%ZZ']],
  ['=5', ['(empty name)']],
  ['Limit=5', ['Limit']],
  ['limit[gt]=5', ['limit[gt]']],
  ['count=none&count=exact', ['count']],
  ['category=a&category=b', ['category']],
  ['before=2026-01-01T00:00:00Z', ['before']],
  [`name=${'x'.repeat(1001)}`, ['name']],
  ['name=a%01b', ['name']],
  ['name=a%7Fb', ['name']],
  [`category[in]=${Array.from({ length: 101 }, (_, i) => `c${i}`).join(',')}`, ['category[in]']],
  // The bounds of what a request carries: filters, sort and count as links write them (":" is "%3A"
  // there), and the raw query string as a whole; the longest parameter is named.
  [`name[prefix]=${':'.repeat(338)}`, ['name[prefix]']],
  [`sort=-priceCents&category[in]=${'b'.repeat(500)}&name=${'a'.repeat(495)}`, ['category[in]']],
  [`limit=5&name=${'%61'.repeat(1400)}`, ['name']],
];

t.test('malformed or conflicting requests are a 400 that names the parameter', async (t) => {
  const { request } = await testApp(t, { seed: { products: 20 } });
  t.ok(cases.length >= 40);
  for (const [query, names] of cases) {
    const res = await request(`/v1/products?${query}`);
    const label = query.length > 60 ? `${query.slice(0, 60)}…` : query;
    t.equal(res.status, 400, label);
    t.equal(res.headers.get('content-type'), 'application/problem+json', label);
    const body = await res.json();
    t.equal(body.code, 'invalid_parameter', label);
    t.equal(body.status, 400, label);
    t.equal(body.title, 'Bad Request', label);
    t.same(
      body.invalid_params.map((p: { name: string }) => p.name),
      names,
      label,
    );
    for (const name of names) t.match(body.detail, name, `${label}: detail names ${name}`);
  }
  // At the bound is taken: 1024 characters of filters as links write them.
  const atBound = await request(`/v1/products?limit=5&name[prefix]=ab${':'.repeat(335)}`);
  t.equal(atBound.status, 200, '"name%5Bprefix%5D=ab" and 335 colons: 1024 characters as links write them');
  const tooLong = await (await request(`/v1/products?name[prefix]=ab${':'.repeat(336)}`)).json();
  t.equal(
    tooLong.invalid_params[0].reason,
    'makes the filters, sort and count, as links write them, 1027 characters long; at most 1024 are allowed',
  );
});

t.test('odd requests on other collections and paths are answered, never with a 500', async (t) => {
  const { request } = await testApp(t, { seed: { products: 5, orders: 5, events: 5 } });
  const paths = [
    '/v1/orders?page=1',
    '/v1/orders?limit=5',
    '/v1/events?offset=1',
    '/v1/events?sort=id',
    '/v1/products?before=2026-13-01T00:00:00Z',
    `/v1/products?${'a=1&'.repeat(500)}`,
    '/v1/products?&&&',
    '/v1/products?limit=5#frag',
    '/v1/%E0%A4%A',
    '/v1/products%00',
    '/v1/../v1/products',
    '/v1/products?name=%F0%9F%98%80',
    `/v1/products?category[in]=${'a,'.repeat(100)}a`,
  ];
  for (const path of paths) {
    const res = await request(path);
    t.ok(res.status < 500, `${path.slice(0, 60)} → ${res.status}`);
    if (res.status !== 200) t.equal(res.headers.get('content-type'), 'application/problem+json', path.slice(0, 60));
  }
});

t.test('a 400 changes nothing: the same valid request answers the same before and after', async (t) => {
  const { json } = await testApp(t, { seed: { products: 30 } });
  const before = await json('/v1/products?limit=3');
  for (const [query] of cases) await json(`/v1/products?${query}`);
  t.same((await json('/v1/products?limit=3')).body, before.body);
});
