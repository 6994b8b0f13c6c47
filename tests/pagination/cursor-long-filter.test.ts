// A cursor carries its filters: the largest `in` filter the API accepts still yields a followable next link.
import t from 'tap';
import { testApp } from '../helpers/app.ts';

t.test('next of a 100-value in filter can be followed', async (t) => {
  const { json } = await testApp(t, { seed: { products: 40 } });
  // 100 values (the most an `in` takes) filling the 1024 characters a query's filters may have.
  const values = ['books', 'toys', ...Array.from({ length: 98 }, (_, i) => `cat-${String(i).padStart(2, '0')}xy`)];
  const length = `category[in]=${values.join(',')}`.length;
  t.ok(length > 900 && length <= 1024, `${length} characters`);
  const first = await json(`/v1/products?page-size=2&category[in]=${values.join(',')}`);
  t.equal(first.status, 200);
  t.ok(first.body._links.next, 'there is a next chunk');
  const next = await json(first.body._links.next.href.replace('http://test.local', ''));
  t.equal(next.status, 200, JSON.stringify(next.body).slice(0, 200));
  t.equal(first.body.products.length, 2);
  t.equal(next.body.products.length, 2);
  t.same(
    [...first.body.products, ...next.body.products].filter((p) => !['books', 'toys'].includes(p.category)),
    [],
    'books and toys only, in both chunks',
  );
});
