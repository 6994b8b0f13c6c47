// Filters, without a database: which parameters are filters, their operators and values, canonical form, and the SQL.
import { PgDialect } from 'drizzle-orm/pg-core';
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import {
  filterCondition,
  filterParam,
  filtersKey,
  filterValues,
  isFilterName,
  MAX_IN_VALUES,
  parseFilters,
} from '../../lib/pagination/filters.ts';
import type { FilterOp } from '../../lib/pagination/registry.ts';
import { snapshotRegistry } from '../helpers/collections.ts';
import { invalidParameter, problemOf } from '../helpers/problem.ts';

const registry = demoRegistry();
const dialect = new PgDialect();
const parse = (collection: string, query: [string, string][]) => parseFilters(registry.get(collection)!, new Map(query));
const TIMESTAMP = 'must be an RFC 3339 timestamp with at most six fractional digits, e.g. 2026-11-21T10:00:00.123456Z';
const INT4 = 'must be an integer from -2147483648 to 2147483647';

// The README's table of filters ("Using the API"), with a value of the field's type for each.
const table: Record<string, Record<string, { ops: FilterOp[]; sample: string }>> = {
  products: {
    category: { ops: ['eq', 'in'], sample: 'books' },
    priceCents: { ops: ['eq', 'lt', 'lte', 'gt', 'gte'], sample: '1999' },
    name: { ops: ['eq', 'prefix'], sample: 'Fine' },
  },
  orders: {
    status: { ops: ['eq', 'in'], sample: 'paid' },
    customerId: { ops: ['eq'], sample: '7' },
    totalCents: { ops: ['lt', 'lte', 'gt', 'gte'], sample: '500' },
  },
  events: { type: { ops: ['eq', 'in'], sample: 'click' }, source: { ops: ['eq'], sample: 'web' } },
};
const allOps: FilterOp[] = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'prefix'];
const spelled = (field: string, op: FilterOp) => (op === 'eq' ? field : `${field}[${op}]`);

t.test('every field and operator of every collection: offered ones parse, others are a 400 listing what the field takes', async (t) => {
  for (const [name, fields] of Object.entries(table)) {
    const collection = registry.get(name)!;
    t.same(Object.keys(collection.filters).sort(), Object.keys(fields).sort(), `${name}: the filtered fields`);
    for (const [field, { ops, sample }] of Object.entries(fields)) {
      const offered = ops.map((op) => `${spelled(field, op)}=`).join(', ');
      for (const op of allOps) {
        const param = spelled(field, op);
        t.ok(isFilterName(collection, param), `${name}: ${param} has the shape of a filter`);
        const outcome = problemOf(() => parse(name, [[param, sample]]));
        if (ops.includes(op)) t.same(parse(name, [[param, sample]]), [{ field, op, values: [sample] }], `${name}?${param}`);
        else t.same(outcome, invalidParameter(param, `is not a supported filter; ${field} takes ${offered}`), `${name}?${param}`);
      }
      if (ops.includes('eq'))
        t.same(parse(name, [[`${field}[eq]`, sample]]), [{ field, op: 'eq', values: [sample] }], `${name}: ${field}[eq] is ${field}`);
    }
  }
});

t.test('names that are not filters are left to the caller', async (t) => {
  const products = registry.get('products')!;
  for (const name of [
    'limit',
    'sort',
    'count',
    'colour',
    'Category',
    'category[IN]',
    'category[]',
    'category[in',
    'category[in]x',
    '1category',
    'createdAt',
    'id',
    'name[prefix][in]',
  ]) {
    t.notOk(isFilterName(products, name), name);
    t.same(parse('products', [[name, 'x']]), [], `${name} is not parsed`);
  }
  t.notOk(isFilterName(products, 'status'), "another collection's field");
});

t.test('values are checked by field type and normalised', async (t) => {
  t.same(parse('products', [['priceCents[gte]', '007']]), [{ field: 'priceCents', op: 'gte', values: ['7'] }]);
  t.same(parse('products', [['priceCents', '-2147483648']]), [{ field: 'priceCents', op: 'eq', values: ['-2147483648'] }]);
  t.same(parse('orders', [['totalCents[lt]', '2147483647']]), [{ field: 'totalCents', op: 'lt', values: ['2147483647'] }]);
  for (const value of ['2147483648', '-2147483649', '1.5', 'ten', '+1', '0x10', '1e3']) {
    t.same(
      problemOf(() => parse('products', [['priceCents[lt]', value]])),
      invalidParameter('priceCents[lt]', INT4),
      value,
    );
  }
  t.same(
    problemOf(() => parse('orders', [['customerId', '-']])),
    invalidParameter('customerId', INT4),
  );
  t.same(parse('products', [['name', 'x'.repeat(1000)]])[0]!.values[0]!.length, 1000);
  t.same(
    problemOf(() => parse('products', [['name[prefix]', 'x'.repeat(1001)]])),
    invalidParameter('name[prefix]', 'must be at most 1000 characters'),
  );
  t.same(parse('products', [['name', ' a%_\\ ']]), [{ field: 'name', op: 'eq', values: [' a%_\\ '] }], 'text as it is');
});

t.test('in: a comma list of at most 100 values, deduplicated and sorted, none empty', async (t) => {
  t.same(parse('products', [['category[in]', 'toys,books,toys']]), [{ field: 'category', op: 'in', values: ['books', 'toys'] }]);
  t.same(parse('orders', [['status[in]', 'b,B,a']]), [{ field: 'status', op: 'in', values: ['B', 'a', 'b'] }], 'by code unit');
  t.same(parse('events', [['type[in]', 'click']]), [{ field: 'type', op: 'in', values: ['click'] }]);
  const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`).join(',');
  t.equal(MAX_IN_VALUES, 100);
  t.equal(parse('products', [['category[in]', values(100)]])[0]!.values.length, 100);
  t.same(
    problemOf(() => parse('products', [['category[in]', values(101)]])),
    invalidParameter('category[in]', 'takes at most 100 values'),
  );
  t.same(
    problemOf(() => parse('products', [['category[in]', `${values(100)},v0`]])),
    invalidParameter('category[in]', 'takes at most 100 values'),
    'counted before deduplication',
  );
  for (const value of [',', 'a,', ',a', 'a,,b']) {
    t.same(
      problemOf(() => parse('products', [['category[in]', value]])),
      invalidParameter('category[in]', 'must be a comma list without empty values'),
      value,
    );
  }
  t.same(
    problemOf(() => parse('products', [['category[in]', `a,${'x'.repeat(1001)}`]])),
    invalidParameter('category[in]', 'must be at most 1000 characters'),
    'each value bounded',
  );
});

t.test('filters come out in one canonical order, so equal sets compare equal', async (t) => {
  const a = parse('products', [
    ['priceCents[lt]', '500'],
    ['name[prefix]', 'F'],
    ['category', 'books'],
    ['priceCents[gt]', '100'],
  ]);
  const b = parse('products', [
    ['category', 'books'],
    ['priceCents[gt]', '0100'],
    ['name[prefix]', 'F'],
    ['priceCents[lt]', '500'],
  ]);
  t.same(a.map(filterParam), [
    ['category', 'books'],
    ['name[prefix]', 'F'],
    ['priceCents[gt]', '100'],
    ['priceCents[lt]', '500'],
  ]);
  t.same(a, b);
  for (const filter of a) t.same(parse('products', [filterParam(filter)]), [filter], `${filterParam(filter)[0]} reads back as itself`);
  t.same(filterParam({ field: 'category', op: 'in', values: ['books', 'toys'] }), ['category[in]', 'books,toys']);
});

t.test('timestamp and int8 fields, on a collection beyond the demo ones', async (t) => {
  const stamped = snapshotRegistry(`
collections:
  - relation: demo.products
    name: stamped
    fieldNames: camelCase
    columns: [id, created_at]
    variants: [offset]
    filters: { id: [eq, in], created_at: [gte, in] }
    sort: [id]
    order: id
`).get('stamped')!;
  const parseStamped = (query: [string, string][]) => parseFilters(stamped, new Map(query));
  t.same(parseStamped([['createdAt[gte]', '2026-01-01T10:00:00.5+01:00']]), [
    { field: 'createdAt', op: 'gte', values: ['2026-01-01T10:00:00.500000+01:00'] },
  ]);
  t.same(
    parseStamped([['createdAt[in]', '2026-01-01T00:00:00Z,2026-01-01T00:00:00.000000z']]),
    [{ field: 'createdAt', op: 'in', values: ['2026-01-01T00:00:00.000000+00:00'] }],
    'deduplicated after normalising',
  );
  t.same(
    problemOf(() => parseStamped([['createdAt[gte]', '2026-02-29T00:00:00Z']])),
    invalidParameter('createdAt[gte]', TIMESTAMP),
  );
  t.same(parseStamped([['id[in]', '10,9,009']]), [{ field: 'id', op: 'in', values: ['10', '9'] }], 'normalised, then sorted as text');
  t.same(parseStamped([['id', '9223372036854775807']]), [{ field: 'id', op: 'eq', values: ['9223372036854775807'] }]);
  t.same(parseStamped([['id', '-9223372036854775808']]), [{ field: 'id', op: 'eq', values: ['-9223372036854775808'] }]);
  for (const value of ['9223372036854775808', '-9223372036854775809']) {
    t.same(
      problemOf(() => parseStamped([['id', value]])),
      invalidParameter('id', 'must be an integer from -9223372036854775808 to 9223372036854775807'),
      value,
    );
  }
});

t.test('the SQL of the filters: a placeholder per filter, values apart, LIKE prefixes escaped, nothing for no filter', async (t) => {
  const products = registry.get('products')!;
  t.equal(filterCondition(products, []), undefined);
  const filters = parse('products', [
    ['category[in]', 'toys,books'],
    ['name[prefix]', '50%_off\\'],
    ['priceCents[lte]', '0100'],
  ]);
  const query = dialect.sqlToQuery(filterCondition(products, filters)!);
  t.equal(
    query.sql,
    '("demo"."products"."category" = any($1::"pg_catalog"."text"[]) and "demo"."products"."name" like $2 and "demo"."products"."price_cents" <= $3::"pg_catalog"."int4")',
    'one array parameter for in, whatever the number of values',
  );
  t.same(
    query.params.map((param) => (param as { name: string }).name),
    ['f0', 'f1', 'f2'],
  );
  const values: Record<string, unknown> = {};
  filterValues(products, filters, values);
  t.same(values, { f0: '{"books","toys"}', f1: '50\\%\\_off\\\\%', f2: 100 });
  // Other values, the same SQL: the shape depends on the fields and operators only.
  const other = parse('products', [
    ['category[in]', 'a,b,c,d'],
    ['name[prefix]', 'x'],
    ['priceCents[lte]', '5'],
  ]);
  t.equal(dialect.sqlToQuery(filterCondition(products, other)!).sql, query.sql);
  t.equal(filtersKey(other), filtersKey(filters));
  t.not(filtersKey(parse('products', [['priceCents[lt]', '5']])), filtersKey(parse('products', [['priceCents[lte]', '5']])));
  const orders = registry.get('orders')!;
  const one = dialect.sqlToQuery(filterCondition(orders, parse('orders', [['totalCents[gt]', '-5']]))!);
  t.equal(one.sql, '"demo"."orders"."total_cents" > $1::"pg_catalog"."int4"');
  const some: Record<string, unknown> = {};
  filterValues(orders, parse('orders', [['totalCents[gt]', '-5']]), some);
  t.same(some, { f0: -5 });
  // Array elements are quoted and escaped: no value reads as NULL, splits the list or ends the literal.
  const odd: Record<string, unknown> = {};
  filterValues(orders, parse('orders', [['status[in]', 'NULL,a"b,c\\d,{e} f']]), odd);
  t.same(odd, { f0: '{"NULL","a\\"b","c\\\\d","{e} f"}' });
});
