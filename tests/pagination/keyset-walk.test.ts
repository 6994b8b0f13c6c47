// Property: following next over each keyset collection visits exactly the rows plain SQL gives, each once, in order.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import { type TestApp, testApp } from '../helpers/app.ts';
import { followNext } from '../helpers/walk.ts';

type Key = { field: string; descending: boolean };

const columns: Record<string, string> = {
  id: 'id',
  name: 'name',
  category: 'category',
  priceCents: 'price_cents',
  createdAt: 'created_at',
  status: 'status',
  customerId: 'customer_id',
  totalCents: 'total_cents',
  type: 'type',
  source: 'source',
  occurredAt: 'occurred_at',
};

const quote = (text: string) => `'${text.replace(/'/g, "''")}'`;

/** Rows with few distinct values per column, so every sort key ties often and the id tie-breaker matters. */
async function insertRows(app: TestApp) {
  const { sql } = app.database;
  await sql`insert into demo.products (name, category, price_cents, created_at)
    select (array['Anvil', 'anvil', 'Basket', 'Drum', 'Zed', 'Drum kit'])[1 + (i * 31) % 6],
           (array['books', 'toys', 'tools'])[1 + (i * 17) % 3],
           100 + ((i * 13) % 5) * 100,
           '2026-01-01T00:00:00Z'::timestamptz + ((i * 7) % 4) * interval '1 microsecond'
    from generate_series(1, 400) as i`;
  await sql`insert into demo.orders (customer_id, status, total_cents, created_at)
    select 1 + i % 7, (array['paid', 'pending', 'shipped'])[1 + (i * 11) % 3], 500 + ((i * 3) % 5) * 250,
           '2026-01-01T00:00:00Z'::timestamptz + ((i * 5) % 6) * interval '1 microsecond'
    from generate_series(1, 400) as i`;
  await sql`insert into demo.events (type, source, occurred_at, message)
    select (array['login', 'purchase', 'error'])[1 + (i * 7) % 3], (array['web', 'api'])[1 + (i * 3) % 2],
           '2026-01-01T00:00:00Z'::timestamptz + ((i * 3) % 8) * interval '1 microsecond', 'e' || i
    from generate_series(1, 400) as i`;
}

interface Filter {
  readonly param: string;
  readonly where: string;
}

const inFilter = (field: string, values: readonly string[]) =>
  fc.subarray([...values], { minLength: 1 }).map(
    (chosen): Filter => ({
      param: `${field}[in]=${chosen.join(',')}`,
      where: `${columns[field]} in (${chosen.map(quote).join(', ')})`,
    }),
  );
const eqFilter = (field: string, values: readonly (string | number)[]) =>
  fc
    .constantFrom(...values)
    .map((v): Filter => ({ param: `${field}=${v}`, where: `${columns[field]} = ${typeof v === 'number' ? v : quote(v)}` }));
const rangeFilter = (field: string, ops: readonly (readonly [string, string])[], values: readonly number[]) =>
  fc.tuple(fc.constantFrom(...ops), fc.constantFrom(...values)).map(
    ([[op, sqlOp], v]): Filter => ({
      param: `${field}[${op}]=${v}`,
      where: `${columns[field]} ${sqlOp} ${v}`,
    }),
  );
const ranges = [
  ['lt', '<'],
  ['lte', '<='],
  ['gt', '>'],
  ['gte', '>='],
] as const;

const filterArbs = {
  products: [
    inFilter('category', ['books', 'toys', 'tools', 'garden']),
    eqFilter('category', ['books', 'toys']),
    rangeFilter('priceCents', [...ranges, ['eq', '=']], [100, 250, 300, 500]),
    fc
      .constantFrom('A', 'a', 'Dr', 'Drum ', 'Z', 'x')
      .map((p): Filter => ({ param: `name[prefix]=${encodeURIComponent(p)}`, where: `name like ${quote(`${p}%`)}` })),
  ],
  orders: [
    inFilter('status', ['paid', 'pending', 'shipped']),
    eqFilter('customerId', [1, 3, 7]),
    rangeFilter('totalCents', ranges, [500, 1000, 1250]),
  ],
  events: [inFilter('type', ['login', 'purchase', 'error']), eqFilter('source', ['web', 'api'])],
} as const;

const sortFields = { products: ['id', 'name', 'priceCents', 'createdAt'], orders: ['id', 'createdAt', 'totalCents'], events: [] } as const;
const defaultSort: Record<string, Key[]> = {
  products: [{ field: 'id', descending: false }],
  orders: [{ field: 'createdAt', descending: true }],
};

/** docs/reference/api.md, "Sort": id is always the last key, in the direction of the key before it. */
function withId(keys: readonly Key[]): Key[] {
  const at = keys.findIndex((k) => k.field === 'id');
  return at === -1 ? [...keys, { field: 'id', descending: keys.at(-1)?.descending ?? false }] : keys.slice(0, at + 1);
}

type Start = { kind: 'first' } | { kind: 'since'; id: number };

function queryArb(collection: 'products' | 'orders' | 'events') {
  const fields = sortFields[collection];
  const sort =
    fields.length === 0
      ? fc.constant([] as Key[])
      : fc.uniqueArray(fc.record({ field: fc.constantFrom<string>(...fields), descending: fc.boolean() }), {
          maxLength: 3,
          selector: (k) => k.field,
        });
  // events offer the cursor variant only through since_id
  const start: fc.Arbitrary<Start> =
    collection === 'events'
      ? fc.integer({ min: 0, max: 420 }).map((id) => ({ kind: 'since', id }))
      : fc.oneof(
          fc.constant({ kind: 'first' } as Start),
          fc.integer({ min: 0, max: 420 }).map((id): Start => ({ kind: 'since', id })),
        );
  return fc.record({
    filters: fc.uniqueArray(fc.oneof(...filterArbs[collection]), { maxLength: 3, selector: (f) => f.param.split(/[=[]/)[0] }),
    sort,
    start,
    pageSizes: fc.array(fc.integer({ min: 1, max: 60 }), { minLength: 1, maxLength: 4 }),
  });
}

/** The ids of a walk along next from `firstUrl`, page-size taken in turn from `pageSizes`, each chunk checked. */
async function walk(app: TestApp, firstUrl: string, pageSizes: readonly number[]) {
  const collection = firstUrl.split(/[/?]/)[2]!;
  const chunks = await followNext(firstUrl, async (path, chunk) => {
    const size = pageSizes[chunk % pageSizes.length]!;
    // page-size may change between chunks: the cursor carries the rest of the query.
    const url = chunk > 0 ? path.replace(/page-size=\d+/, `page-size=${size}`) : path;
    const { status, body, headers } = await app.json(url);
    assert.equal(status, 200, `${url}: ${JSON.stringify(body)}`);
    assert.equal(body.pageSize, size);
    const items: { id: number }[] = body[collection];
    assert.ok(items.length <= size, `${items.length} items in a chunk of ${size}`);
    // next is absent on an empty chunk, so a next link never leads to one (nothing is deleted here).
    if (chunk > 0) assert.notEqual(items.length, 0, 'a next link led to an empty chunk');
    const next = body._links.next?.href as string | undefined;
    if (next) {
      assert.equal(items.length, size);
      assert.match(next, /^http:\/\/test\.local\/v1\/\w+\?page-size=\d+&cursor=[\w.-]+$/);
      const link = headers.get('link') ?? '';
      assert.ok(link.includes(`<${next}>; rel="next"`), `no rel="next" to ${next} in the Link header: ${link}`);
    }
    return { status, body };
  });
  return chunks.flatMap((chunk) => chunk[collection].map((item: { id: number }) => item.id));
}

for (const collection of ['products', 'orders', 'events'] as const) {
  t.test(`${collection}: following next visits every matching item exactly once, in SQL order`, async (t) => {
    const app = await testApp(t);
    await insertRows(app);
    await fc.assert(
      fc.asyncProperty(queryArb(collection), async ({ filters, sort, start, pageSizes }) => {
        const params = [`page-size=${pageSizes[0]}`, ...filters.map((f) => f.param)];
        const where = ['true', ...filters.map((f) => f.where)];
        let order: Key[];
        if (start.kind === 'since') {
          params.push(`since_id=${start.id}`);
          where.push(`id > ${start.id}`);
          order = [{ field: 'id', descending: false }];
        } else {
          if (sort.length > 0) params.push(`sort=${sort.map((k) => (k.descending ? '-' : '') + k.field).join(',')}`);
          order = withId(sort.length > 0 ? sort : defaultSort[collection]!);
        }
        const orderSql = order.map((k) => `${columns[k.field]} ${k.descending ? 'desc' : 'asc'}`).join(', ');
        const rows = await app.database.sql.unsafe(`select id from demo.${collection} where ${where.join(' and ')} order by ${orderSql}`);
        const expected = rows.map((r) => Number(r.id));
        const seen = await walk(app, `/v1/${collection}?${params.join('&')}`, pageSizes);
        assert.deepEqual(seen, expected, params.join('&'));
      }),
      { numRuns: 40, includeErrorInReport: true },
    );
    t.pass('every walk matched plain SQL');
  });
}

t.test('events: the time variant walks both ways and matches plain SQL', async (t) => {
  const app = await testApp(t);
  await insertRows(app);
  const instants = Array.from({ length: 10 }, (_, i) => `2026-01-01T00:00:00.${String(i).padStart(6, '0')}Z`);
  const markerArb = fc.oneof(
    fc.constant(undefined),
    fc.record({ name: fc.constantFrom('before', 'after'), at: fc.constantFrom(...instants) }),
  );
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(fc.oneof(...filterArbs.events), { maxLength: 2, selector: (f) => f.param.split(/[=[]/)[0] }),
      markerArb,
      fc.array(fc.integer({ min: 1, max: 60 }), { minLength: 1, maxLength: 3 }),
      async (filters, marker, pageSizes) => {
        const params = [`page-size=${pageSizes[0]}`, ...filters.map((f) => f.param)];
        const where = ['true', ...filters.map((f) => f.where)];
        let order = 'occurred_at desc, id desc';
        if (marker) {
          params.push(`${marker.name}=${marker.at}`);
          where.push(`occurred_at ${marker.name === 'before' ? '<' : '>'} '${marker.at}'::timestamptz`);
          if (marker.name === 'after') order = 'occurred_at asc, id asc';
        }
        const rows = await app.database.sql.unsafe(`select id from demo.events where ${where.join(' and ')} order by ${order}`);
        const seen = await walk(app, `/v1/events?${params.join('&')}`, pageSizes);
        assert.deepEqual(
          seen,
          rows.map((r) => Number(r.id)),
          params.join('&'),
        );
      },
    ),
    { numRuns: 40, includeErrorInReport: true },
  );
  t.pass('every time walk matched plain SQL');
});
