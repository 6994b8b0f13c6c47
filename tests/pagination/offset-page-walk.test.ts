// Property: following `next` from the first chunk to the end returns exactly the rows plain SQL gives, each once.
import fc from 'fast-check';
import t from 'tap';
import { testApp } from '../helpers/app.ts';

const sortKeys = { id: 'id', name: 'name', priceCents: 'price_cents', createdAt: 'created_at' } as const;
type SortField = keyof typeof sortKeys;

const filterArb = fc.record(
  {
    category: fc.subarray(['books', 'garden', 'kitchen', 'music', 'toys'], { minLength: 1, maxLength: 3 }),
    priceGte: fc.integer({ min: 0, max: 100_000 }),
    priceLt: fc.integer({ min: 0, max: 100_000 }),
    namePrefix: fc.constantFrom('A', 'B', 'C', 'Fine', 'Grand Ink', 'Z'),
  },
  { requiredKeys: [] },
);
const sortArb = fc.uniqueArray(
  fc.record({ field: fc.constantFrom<SortField>('id', 'name', 'priceCents', 'createdAt'), descending: fc.boolean() }),
  { maxLength: 3, selector: (key) => key.field },
);

t.test('walking next visits every matching row once, in SQL order', async (t) => {
  const { json, database } = await testApp(t, { seed: { products: 300 } });
  // Ties on every sort key, so the id tie-breaker matters.
  await database.sql`insert into demo.products (name, category, price_cents, created_at)
    select 'Fine Anvil 1', 'books', 5000, '2025-06-01T00:00:00.000001Z' from generate_series(1, 25)`;

  await fc.assert(
    fc.asyncProperty(filterArb, sortArb, fc.integer({ min: 1, max: 40 }), fc.boolean(), async (filter, sort, size, byPage) => {
      const query: string[] = [];
      const where: string[] = ['true'];
      if (filter.category) {
        query.push(`category[in]=${filter.category.join(',')}`);
        where.push(`category in (${filter.category.map((c) => `'${c}'`).join(',')})`);
      }
      if (filter.priceGte !== undefined) {
        query.push(`priceCents[gte]=${filter.priceGte}`);
        where.push(`price_cents >= ${filter.priceGte}`);
      }
      if (filter.priceLt !== undefined) {
        query.push(`priceCents[lt]=${filter.priceLt}`);
        where.push(`price_cents < ${filter.priceLt}`);
      }
      if (filter.namePrefix !== undefined) {
        query.push(`name[prefix]=${encodeURIComponent(filter.namePrefix)}`);
        where.push(`name like '${filter.namePrefix}%'`);
      }
      const keys = [...sort];
      if (keys.length > 0) query.push(`sort=${keys.map((k) => (k.descending ? '-' : '') + k.field).join(',')}`);
      const idAt = keys.findIndex((k) => k.field === 'id');
      const order =
        idAt === -1 ? [...keys, { field: 'id' as const, descending: keys.at(-1)?.descending ?? false }] : keys.slice(0, idAt + 1);
      const orderSql = order.map((k) => `${sortKeys[k.field]} ${k.descending ? 'desc' : 'asc'}`).join(', ');
      const expected = (await database.sql.unsafe(`select id from demo.products where ${where.join(' and ')} order by ${orderSql}`)).map(
        (r) => Number(r.id),
      );

      const first = byPage ? `page=0&page-size=${size}` : `limit=${size}`;
      let url: string | undefined = `/v1/products?${[first, ...query].join('&')}`;
      const seen: number[] = [];
      let chunks = 0;
      while (url) {
        const { status, body } = await json(url.replace('http://test.local', ''));
        if (status !== 200) throw new Error(`${url}: ${status} ${JSON.stringify(body)}`);
        if (byPage ? body.totalPages !== Math.ceil(expected.length / size) : body.size !== expected.length) {
          throw new Error(`${url}: size does not match SQL`);
        }
        seen.push(...body.products.map((p: { id: number }) => p.id));
        url = body._links.next?.href;
        if (++chunks > expected.length + 2) throw new Error('next never ends');
      }
      if (JSON.stringify(seen) !== JSON.stringify(expected)) {
        throw new Error(`walk of ${first}&${query.join('&')} gave ${seen.length} ids, SQL ${expected.length}`);
      }
    }),
    { numRuns: 60, includeErrorInReport: true, seed: Number(process.env.PROPERTY_SEED ?? Date.now() % 2 ** 31) },
  );
  t.pass('60 random walks matched SQL');
});
