// Offset and page pagination: every rule of docs/reference/api.md ("Parameters", "The chunk", "Links") that concerns them.
import t from 'tap';
import { testApp } from '../helpers/app.ts';

const SIZE = 230;

t.test('offset and page chunks', async (t) => {
  const { json, request, database } = await testApp(t, { seed: { products: SIZE } });
  const ids = (await database.sql`select id from demo.products order by id`).map((row) => Number(row.id));

  t.test('defaults: the first chunk of the default variant, limit 20, offset 0, exact size', async (t) => {
    const { status, body, headers } = await json('/v1/products');
    t.equal(status, 200);
    t.match(headers.get('content-type'), /^application\/json/);
    t.same(Object.keys(body), ['offset', 'limit', 'size', 'count', 'products', '_links']);
    t.equal(body.offset, 0);
    t.equal(body.limit, 20);
    t.equal(body.size, SIZE);
    t.equal(body.count, 'exact', 'a small set: counted');
    t.same(
      body.products.map((p: any) => p.id),
      ids.slice(0, 20),
    );
    t.same(Object.keys(body.products[0]), ['id', 'name', 'category', 'priceCents', 'createdAt']);
    t.match(body.products[0].createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  t.test('SPEC 2.1 rule 1: the next offset is offset + limit; links self/next/prev/first/last', async (t) => {
    const { body } = await json('/v1/products?limit=7&offset=40');
    t.same(
      body.products.map((p: any) => p.id),
      ids.slice(40, 47),
    );
    t.equal(body._links.self.href, 'http://test.local/v1/products?limit=7&offset=40');
    t.equal(body._links.next.href, 'http://test.local/v1/products?limit=7&offset=47');
    t.equal(body._links.prev.href, 'http://test.local/v1/products?limit=7&offset=33');
    t.equal(body._links.first.href, 'http://test.local/v1/products?limit=7&offset=0');
    // the last chunk on the grid of this offset: 40 + 7k ≤ 229
    t.equal(body._links.last.href, 'http://test.local/v1/products?limit=7&offset=229');
  });

  t.test('prev never goes below zero and is absent on the first chunk', async (t) => {
    t.equal((await json('/v1/products?limit=10&offset=3')).body._links.prev.href, 'http://test.local/v1/products?limit=10&offset=0');
    t.equal((await json('/v1/products?limit=10')).body._links.prev, undefined);
  });

  t.test('the Link header carries the same links (RFC 8288)', async (t) => {
    const res = await request('/v1/products?limit=5&offset=5');
    const body = await res.json();
    const header = res.headers.get('link')!;
    for (const [rel, link] of Object.entries(body._links) as [string, { href: string }][]) {
      t.match(header, `<${link.href}>; rel="${rel}"`, rel);
    }
    // Then the two links to the service's description and docs page (RFC 8631).
    t.equal(header.split(', <').length, Object.keys(body._links).length + 2);
    t.ok(header.endsWith(', </openapi.json>; rel="service-desc", </docs>; rel="service-doc"'));
  });

  t.test('next is absent on the last chunk and on an empty one; past the end is 200 with []', async (t) => {
    const last = await json(`/v1/products?limit=30&offset=${SIZE - 30}`);
    t.equal(last.body.products.length, 30);
    t.equal(last.body._links.next, undefined);
    const exact = await json(`/v1/products?limit=10&offset=${SIZE - 10}`);
    t.equal(exact.body._links.next, undefined, 'a chunk that ends exactly at the end has no next');
    const past = await json(`/v1/products?limit=10&offset=${SIZE + 100}`);
    t.equal(past.status, 200);
    t.same(past.body.products, []);
    t.equal(past.body._links.next, undefined);
    t.equal(past.body.size, SIZE);
    const empty = await json('/v1/products?category=nothing-here');
    t.same(empty.body.products, []);
    t.equal(empty.body.size, 0);
    t.equal(empty.body._links.next, undefined);
    t.equal(empty.body._links.last.href, 'http://test.local/v1/products?limit=20&offset=0&category=nothing-here');
  });

  t.test('page: offset = page-size × page, zero-based; page envelope', async (t) => {
    const { body } = await json('/v1/products?page=3&page-size=9');
    t.same(Object.keys(body), ['page', 'pageSize', 'totalPages', 'count', 'products', '_links']);
    t.equal(body.page, 3);
    t.equal(body.pageSize, 9);
    t.equal(body.totalPages, Math.ceil(SIZE / 9));
    t.same(
      body.products.map((p: any) => p.id),
      ids.slice(27, 36),
    );
    t.equal(body._links.next.href, 'http://test.local/v1/products?page=4&page-size=9');
    t.equal(body._links.prev.href, 'http://test.local/v1/products?page=2&page-size=9');
    t.equal(body._links.first.href, 'http://test.local/v1/products?page=0&page-size=9');
    t.equal(body._links.last.href, `http://test.local/v1/products?page=${Math.ceil(SIZE / 9) - 1}&page-size=9`);
    const byPage = await json('/v1/products?page=0');
    t.equal(byPage.body.pageSize, 20, 'page-size defaults to 20');
    t.same(
      byPage.body.products.map((p: any) => p.id),
      ids.slice(0, 20),
    );
  });

  t.test('SPEC 4.1 rule 1: offset and page are interchangeable', async (t) => {
    const byOffset = await json('/v1/products?limit=12&offset=48');
    const byPage = await json('/v1/products?page=4&page-size=12');
    t.same(byPage.body.products, byOffset.body.products);
  });

  t.test('the last page has no next; a page past the end is 200 with []', async (t) => {
    const pages = Math.ceil(SIZE / 25);
    const last = await json(`/v1/products?page=${pages - 1}&page-size=25`);
    t.equal(last.body.products.length, SIZE - (pages - 1) * 25);
    t.equal(last.body._links.next, undefined);
    const past = await json(`/v1/products?page=${pages + 5}&page-size=25`);
    t.equal(past.status, 200);
    t.same(past.body.products, []);
    t.equal(past.body._links.next, undefined);
  });

  t.test('count: exact, estimated (planner estimate), none (no size, no last)', async (t) => {
    const estimated = await json('/v1/products?count=estimated&limit=5');
    t.type(estimated.body.size, 'number');
    t.ok(estimated.body.size > SIZE / 2 && estimated.body.size < SIZE * 2, `estimate ${estimated.body.size} is near ${SIZE}`);
    const none = await json('/v1/products?count=none&limit=5');
    t.same(Object.keys(none.body), ['offset', 'limit', 'products', '_links']);
    t.equal(none.body._links.last, undefined);
    t.equal(none.body._links.next.href, 'http://test.local/v1/products?limit=5&offset=5&count=none');
    const page = await json('/v1/products?page=1&count=none');
    t.same(Object.keys(page.body), ['page', 'pageSize', 'products', '_links']);
    const pageEstimated = await json('/v1/products?page=1&count=estimated&category=books');
    t.type(pageEstimated.body.totalPages, 'number');
  });

  t.test('filters and sort select and order items, and every link carries them', async (t) => {
    const rows = await database.sql`
      select id from demo.products where category in ('books', 'toys') and price_cents >= 5000
      order by price_cents desc, id desc`;
    const expected = rows.map((row) => Number(row.id));
    const path = '/v1/products?limit=10&offset=10&category[in]=toys,books&priceCents[gte]=5000&sort=-priceCents';
    const { body } = await json(path);
    t.same(
      body.products.map((p: any) => p.id),
      expected.slice(10, 20),
    );
    t.equal(body.size, expected.length);
    for (const rel of ['self', 'next', 'prev', 'first', 'last']) {
      t.match(body._links[rel].href, /&category%5Bin%5D=toys,books&priceCents%5Bgte%5D=5000&sort=-priceCents$/, rel);
    }
  });

  t.test('filter operators', async (t) => {
    const [{ name, price }] = (await database.sql`select name, price_cents as price from demo.products where id = 17`) as any;
    const cases: [string, string][] = [
      [`name=${encodeURIComponent(name)}`, `name = '${name.replace(/'/g, "''")}'`],
      [`name[prefix]=Amber`, `name like 'Amber%'`],
      [`priceCents=${price}`, `price_cents = ${price}`],
      [`priceCents[lt]=${price}`, `price_cents < ${price}`],
      [`priceCents[lte]=${price}`, `price_cents <= ${price}`],
      [`priceCents[gt]=${price}`, `price_cents > ${price}`],
      [`category=books`, `category = 'books'`],
    ];
    for (const [query, where] of cases) {
      const expected = (await database.sql.unsafe(`select count(*) as n from demo.products where ${where}`))[0]!.n;
      const { status, body } = await json(`/v1/products?limit=1&${query}`);
      t.equal(status, 200, query);
      t.equal(body.size, Number(expected), query);
    }
  });

  t.test('prefix treats % and _ literally; + means a space', async (t) => {
    await database.sql`insert into demo.products (name, category, price_cents) values ('50% off', 'x', 1), ('50_ off', 'x', 1), ('a b', 'x', 1)`;
    t.equal((await json('/v1/products?name[prefix]=50%25')).body.size, 1);
    t.equal((await json('/v1/products?name[prefix]=50_')).body.size, 1);
    t.equal((await json('/v1/products?name=a+b')).body.size, 1);
    t.equal((await json('/v1/products?name=a%20b')).body.size, 1);
  });

  t.test('sort keys, directions and the id tie-breaker', async (t) => {
    for (const sort of ['name', '-name', 'priceCents', '-createdAt', 'id', '-id', 'category']) {
      const { status, body } = await json(`/v1/products?limit=100&sort=${sort}`);
      if (sort === 'category') {
        t.equal(status, 400, 'category is not a sort key');
        continue;
      }
      const column = { name: 'name', priceCents: 'price_cents', createdAt: 'created_at', id: 'id' }[sort.replace('-', '')]!;
      const dir = sort.startsWith('-') ? 'desc' : 'asc';
      const rows = await database.sql.unsafe(`select id from demo.products order by ${column} ${dir}, id ${dir} limit 100`);
      t.same(
        body.products.map((p: any) => p.id),
        rows.map((r) => Number(r.id)),
        sort,
      );
    }
  });

  t.test('PUBLIC_URL sets the base of every href', async (t) => {
    const other = await testApp(t, { env: { PUBLIC_URL: 'https://api.example.com/base/' } });
    const { body } = await other.json('/v1/products?limit=5');
    t.equal(body._links.self.href, 'https://api.example.com/base/v1/products?limit=5&offset=0');
  });

  t.test('forwarded host and proto are honoured only with TRUST_PROXY', async (t) => {
    const headers = { 'x-forwarded-host': 'public.example', 'x-forwarded-proto': 'https' };
    const untrusted = await json('/v1', { headers });
    t.equal(untrusted.body._links.self.href, 'http://test.local/v1');
    const trusted = await testApp(t, { env: { TRUST_PROXY: '1' } });
    t.equal((await trusted.json('/v1', { headers })).body._links.self.href, 'https://public.example/v1');
  });
});
