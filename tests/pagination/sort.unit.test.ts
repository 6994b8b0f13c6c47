// The sort parameter, without a database: keys, directions, the id tie-breaker, errors, and the ORDER BY.
import { sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import fc from 'fast-check';
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import type { SortKey } from '../../lib/pagination/registry.ts';
import { orderBy, parseSort, sortParam, withTieBreaker } from '../../lib/pagination/sort.ts';
import { invalidParameter, problemOf } from '../helpers/problem.ts';

const registry = demoRegistry();
const products = registry.get('products')!;
const sortOf = (collection: string, text: string | undefined) =>
  parseSort(registry.get(collection)!, new Map(text === undefined ? [] : [['sort', text]]));
const key = (text: string): SortKey => ({ field: text.replace(/^-/, ''), descending: text.startsWith('-') });
const keys = (...texts: string[]) => texts.map(key);

t.test('no sort: the collection default, ending with id in the direction of the key before it', async (t) => {
  t.same(sortOf('products', undefined), keys('id'));
  t.same(sortOf('orders', undefined), keys('-createdAt', '-id'));
  t.same(sortOf('events', undefined), keys('-occurredAt', '-id'));
});

t.test('a sort: its keys, then id; nothing after id counts', async (t) => {
  t.same(sortOf('products', 'name'), keys('name', 'id'));
  t.same(sortOf('products', '-name'), keys('-name', '-id'));
  t.same(sortOf('products', 'name,-priceCents'), keys('name', '-priceCents', '-id'));
  t.same(sortOf('products', '-priceCents,name'), keys('-priceCents', 'name', 'id'));
  t.same(sortOf('products', '-id'), keys('-id'));
  t.same(sortOf('products', 'name,-id,priceCents'), keys('name', '-id'), 'id ends the order: later keys could never decide');
  t.same(sortOf('orders', 'totalCents,-createdAt'), keys('totalCents', '-createdAt', '-id'));
});

t.test('a key the collection does not sort by, a repeated key, or a malformed list is a 400 naming sort', async (t) => {
  const productsReason = 'must be a comma list of id, name, priceCents, createdAt, each optionally prefixed with -';
  for (const text of ['price', 'category', 'Name', 'name,', ',name', 'name,,id', '--name', '+name', ' name', 'name ', 'name;id', '']) {
    t.same(
      problemOf(() => sortOf('products', text)),
      invalidParameter('sort', productsReason),
      JSON.stringify(text),
    );
  }
  t.same(
    problemOf(() => sortOf('orders', 'name')),
    invalidParameter('sort', 'must be a comma list of id, createdAt, totalCents, each optionally prefixed with -'),
  );
  t.same(
    problemOf(() => sortOf('products', 'name,name')),
    invalidParameter('sort', 'names name twice'),
  );
  t.same(
    problemOf(() => sortOf('products', 'name,-name')),
    invalidParameter('sort', 'names name twice'),
    'in either direction',
  );
  t.same(
    problemOf(() => sortOf('products', 'name,id,name')),
    invalidParameter('sort', 'names name twice'),
    'even past id',
  );
  for (const text of ['id', '-occurredAt', 'occurredAt']) {
    t.same(
      problemOf(() => sortOf('events', text)),
      invalidParameter('sort', 'is not offered by this collection'),
      `events: ${text}`,
    );
  }
});

t.test('withTieBreaker and sortParam', async (t) => {
  t.same(withTieBreaker([]), keys('id'));
  t.same(withTieBreaker(keys('-a')), keys('-a', '-id'));
  t.same(withTieBreaker(keys('a', '-b')), keys('a', '-b', '-id'));
  t.same(withTieBreaker(keys('-id', 'a')), keys('-id'));
  t.equal(sortParam(keys('name', '-priceCents', '-id')), 'name,-priceCents,-id');
  t.equal(sortParam([]), '');
});

t.test('property: any valid sort reads back from its own sortParam as itself', async (t) => {
  const sortKeys = products.sortKeys;
  const sortText = fc
    .uniqueArray(fc.constantFrom(...sortKeys), { minLength: 1, maxLength: sortKeys.length })
    .chain((fields) =>
      fc
        .tuple(...fields.map((field) => fc.boolean().map((descending) => (descending ? `-${field}` : field))))
        .map((parts) => parts.join(',')),
    );
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(sortText, (text) => {
        const parsed = sortOf('products', text);
        const written = text.split(',');
        const idAt = written.findIndex((part) => part.replace(/^-/, '') === 'id');
        const expected = idAt === -1 ? [...written, written.at(-1)!.startsWith('-') ? '-id' : 'id'] : written.slice(0, idAt + 1);
        return sortParam(parsed) === expected.join(',') && JSON.stringify(sortOf('products', sortParam(parsed))) === JSON.stringify(parsed);
      }),
      { numRuns: 300 },
    ),
  );
});

t.test('orderBy: one ORDER BY term per key, in its direction', async (t) => {
  const render = (sortKeys: SortKey[]) => new PgDialect().sqlToQuery(sql.join(orderBy(products, sortKeys), sql`, `)).sql;
  t.equal(
    render(keys('-priceCents', 'name', 'id')),
    '"demo"."products"."price_cents" desc, "demo"."products"."name" asc, "demo"."products"."id" asc',
  );
  t.equal(render(keys('createdAt', '-id')), '"demo"."products"."created_at" asc, "demo"."products"."id" desc');
});
