// Links a person can paste, over a listening server: no "[" "]" in any href or Link header, and curl without -g follows them.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { listening } from '../helpers/listening.ts';

const run = promisify(execFile);

t.test('every href and Link header of filtered chunks is free of brackets, and curl follows a pasted next link', async (t) => {
  const api = await testApp(t, { seed: { products: 200, orders: 50, events: 50 } });
  const origin = await listening(t, api.app);
  const paths = [
    '/v1/products?category[in]=books,toys&priceCents[gte]=0&limit=2&sort=-priceCents,name',
    '/v1/products?name[prefix]=F&limit=2',
    '/v1/products?page=1&page-size=2&category[in]=books,toys',
    '/v1/products?page-size=2&category[in]=books,toys&sort=name',
    '/v1/orders?page-size=2&totalCents[gte]=1',
    '/v1/events?page-size=2&type[in]=login,logout',
  ];
  let next = '';
  for (const path of paths) {
    const res = await fetch(`${origin}${path}`);
    t.equal(res.status, 200, path);
    const link = res.headers.get('link')!;
    t.notMatch(link, /[[\]]/, `${path}: Link header`);
    const { _links } = await res.json();
    for (const [rel, { href }] of Object.entries(_links as Record<string, { href: string }>)) {
      t.notMatch(href, /[[\]]/, `${path}: ${rel}`);
      t.match(link, `<${href}>; rel="${rel}"`, `${path}: ${rel} in the Link header as in the body`);
    }
    if (path.startsWith('/v1/products?category')) next = _links.next.href;
  }
  t.match(next, /category%5Bin%5D=books,toys/);
  if (!existsSync('/usr/bin/curl')) {
    t.comment('curl is not installed: the pasted link was checked with fetch only');
    t.equal((await fetch(next)).status, 200);
    return;
  }
  // curl without -g reads "[" "]" as a glob: a pasted link must not hold them.
  const { stdout } = await run('/usr/bin/curl', ['-s', '-w', '\n%{http_code}', next]);
  const [body, status] = [stdout.slice(0, stdout.lastIndexOf('\n')), stdout.slice(stdout.lastIndexOf('\n') + 1)];
  t.equal(status, '200', 'curl fetched the pasted next link');
  const { products } = JSON.parse(body);
  t.equal(products.length, 2, 'a chunk of two');
  t.same(
    products.filter((item: { category: string }) => !['books', 'toys'].includes(item.category)),
    [],
    'the filter still applies',
  );
});
