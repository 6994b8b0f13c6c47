// The cost rule (lib/pagination/price.ts) without a database: every parameter and pair, mixes, sizes, and the
// arithmetic case by case; a 400 costs 1, a chunk what the handler serves.
import fc from 'fast-check';
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import type { CatalogModel } from '../../lib/catalog/model.ts';
import { CollectionsFileError } from '../../lib/collections/problems.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { parseQueryString } from '../../lib/pagination/params.ts';
import { readQuery, requestCost } from '../../lib/pagination/prepare.ts';
import type { Collection } from '../../lib/pagination/registry.ts';
import { demoCatalog, snapshotRegistry } from '../helpers/collections.ts';

const SECRET = 'cost-unit-secret-0123456789abcdefghij';

/** The demo's catalog as it would be had demo.products no index but its primary key's: nothing serves a sort by name. */
function withoutProductIndexes(): CatalogModel {
  const catalog = demoCatalog();
  return {
    relations: catalog.relations.map((relation) =>
      relation.schema === 'demo' && relation.name === 'products'
        ? { ...relation, indexes: relation.indexes.filter((index) => index.primary) }
        : relation,
    ),
  };
}

/** A collection over those products, its name sort accepted without an index at 250 units (docs/reference/costs.md, "The rule": unindexedSort). */
const unindexedFile = (settings: string) => `
collections:
  - relation: demo.products
    name: unindexed
    columns: [id, name]
    sort: [id, name]
    order: id
    unindexedSorts: true
${settings}`;

// The demo collections, and one whose name sort has no index, so that the order's first key changes what a chunk costs.
const registry = new Map([
  ...demoRegistry(),
  ...snapshotRegistry(
    unindexedFile(`    variants: [offset, page, cursor]
    defaultVariant: offset
    filters: { name: [eq, prefix] }
    cost: { unindexedSort: 250 }`),
    withoutProductIndexes(),
  ),
]);
const collections = [...registry.values()];

/** What the handler serves: the chunk's size, the rows skipped, the order's first key, an exact count. */
interface Served {
  readonly pageSize: number;
  readonly offset: number;
  readonly firstKey: string;
  readonly count: string;
}

type Outcome = { readonly kind: 'served'; readonly served: Served } | { readonly kind: 'refused'; readonly error: ApiError };

/** The handler's reading of GET /v1/{collection}, as lib/pagination/prepare.ts reads it before its first query. */
/** The planner's estimate every count is priced with here: above the demo threshold, so auto and exact differ. */
const ESTIMATE = 23_456;

function handle(collection: Collection, raw: string): Outcome {
  try {
    const { plan } = readQuery(collection, parseQueryString(raw), SECRET);
    const { pageSize, offset, firstKey, count } = plan;
    return { kind: 'served', served: { pageSize, offset, firstKey, count } };
  } catch (error) {
    if (error instanceof ApiError) return { kind: 'refused', error };
    throw error;
  }
}

/** What a served query asks for, read from its parameters alone: the oracle of the plan. */
function oracle(collection: Collection, raw: string): Served {
  const params = new URLSearchParams(raw);
  const number = (name: string) => (params.has(name) ? Number(params.get(name)) : undefined);
  const variant = handleVariant(collection, raw);
  const pageSize = number('limit') ?? number('page-size') ?? collection.pageSize.default;
  const offset = variant === 'offset' ? (number('offset') ?? 0) : variant === 'page' ? (number('page') ?? 0) * pageSize : 0;
  const count = params.get('count');
  const carried = params.has('cursor')
    ? (readQuery(collection, parseQueryString(raw), SECRET).request.cursor?.s as string | undefined)
    : undefined;
  const firstKey =
    variant === 'time'
      ? collection.timeField!
      : params.has('since_id')
        ? 'id'
        : (carried ?? params.get('sort') ?? collection.defaultSort.map((key) => key.field).join(',')).split(',')[0]!.replace(/^-/, '');
  const mode = count === null ? 'auto' : count === 'planned' ? 'estimated' : count;
  return { pageSize, offset, firstKey, count: variant === 'offset' || variant === 'page' ? mode : 'none' };
}

function handleVariant(collection: Collection, raw: string): string {
  return readQuery(collection, parseQueryString(raw), SECRET).variant.name;
}

/** The rule as the README states it ("Cost"), written out on its own. */
function expectedCost(collection: Collection, served: Served): number {
  const { itemsPerUnit, countedPerUnit, indexed, unindexedSort } = collection.cost;
  // An exact count reads the whole estimated set; the default one only a set under the threshold.
  const counted =
    served.count === 'exact' || (served.count === 'auto' && ESTIMATE < collection.countThreshold)
      ? Math.floor(ESTIMATE / countedPerUnit)
      : 0;
  const rows = indexed[served.firstKey];
  const skip =
    rows === undefined
      ? (unindexedSort ?? 0) + Math.floor(served.offset / Math.min(...Object.values(indexed)))
      : Math.floor(served.offset / rows);
  return Math.min(Math.ceil(served.pageSize / itemsPerUnit) + counted + skip, 2 ** 31 - 1);
}

const cursor = (payload: Record<string, unknown>) => `cursor=${encodeCursor(SECRET, payload as never)}`;
const T = '2025-01-01T00:00:00.000000Z';
const pieces = [
  'limit=5',
  'limit=005',
  'limit=0100',
  'limit=101',
  'limit=abc',
  `limit=${'0'.repeat(19)}5`,
  `limit=${'0'.repeat(20)}5`,
  'offset=20',
  'offset=10000',
  'offset=0999000',
  'offset=9007199254740991',
  'offset=9007199254740992',
  'offset=-5',
  'page=3',
  'page=0500',
  'page=90071992547409',
  'page=x',
  'page-size=020',
  'page-size=0100',
  'page-size=101',
  'count=exact',
  'count=estimated',
  'count=none',
  'count=maybe',
  'sort=name',
  'sort=-priceCents,name',
  'sort=-createdAt',
  'sort=totalCents',
  'sort=nope',
  'sort=name,name',
  'since_id=007',
  'since_id=abc',
  'before=2026-01-01T00:00:00Z',
  'before=2026-02-30T00:00:00Z',
  'after=2026-01-01T00:00:00.5+01:00',
  'after=yesterday',
  cursor({ v: 'cursor', c: 'products', s: '-priceCents,name,id', f: [], k: [100, 'x', 5] }),
  cursor({ v: 'cursor', c: 'products', s: 'id', f: [['category', 'books']], k: [3] }),
  cursor({ v: 'cursor', c: 'products', s: 'nope,id', f: [], k: [1, 2] }),
  cursor({ v: 'cursor', c: 'orders', s: '-createdAt,-id', f: [], k: [T, 5] }),
  cursor({ v: 'cursor', c: 'orders', s: 'totalCents,id', f: [['status[in]', 'paid,sent']], k: [500, 9] }),
  cursor({ v: 'cursor', c: 'events', s: 'id', f: [], k: [5] }),
  cursor({ v: 'cursor', c: 'unindexed', s: '-name,-id', f: [], k: ['x', 5] }),
  cursor({ v: 'time', c: 'events', d: 'older', p: [T, 5], f: [] }),
  cursor({ v: 'time', c: 'events', d: 'newer', p: null, f: [['type', 'click']] }),
  cursor({ v: 'time', c: 'events', d: 'sideways', p: null, f: [] }),
  'cursor=abc',
  'category[in]=toys,books',
  'priceCents[gt]=007',
  'name[prefix]=A',
  'status=paid',
  'status[in]=a,,b',
  'totalCents[lt]=x',
  'type=click',
  'type=login',
  'colour=red',
  '%zz',
  'limit=5&limit=5',
];

interface Tally {
  served: number;
  refused: number;
  failures: string[];
}

/** Checks one query against the rule; records what is wrong, if anything. */
function check(collection: Collection, raw: string, tally: Tally): void {
  const label = `${collection.name}?${raw.length > 120 ? `${raw.slice(0, 120)}…` : raw}`;
  const cost = requestCost(collection, raw, SECRET, ESTIMATE);
  const outcome = handle(collection, raw);
  if (outcome.kind === 'refused') {
    tally.refused++;
    if (cost !== 1) tally.failures.push(`${label}: a 400 (${outcome.error.detail}) costs ${cost}`);
    return;
  }
  tally.served++;
  const expected = oracle(collection, raw);
  if (JSON.stringify(outcome.served) !== JSON.stringify(expected)) {
    tally.failures.push(`${label}: plans ${JSON.stringify(outcome.served)}, the parameters ask for ${JSON.stringify(expected)}`);
  }
  const price = expectedCost(collection, expected);
  if (cost !== price) tally.failures.push(`${label}: serves ${JSON.stringify(expected)}, costs ${cost}, not ${price}`);
}

// Thousands of refusals each build an ApiError, whose stack trace is most of the walk's time: none is
// looked at here (a failure reports the query and its detail), so none is captured.
const stackTraceLimit = Error.stackTraceLimit;
Error.stackTraceLimit = 0;
t.teardown(() => {
  Error.stackTraceLimit = stackTraceLimit;
});

t.test('every single parameter and every pair, on every collection: a 400 costs 1, a chunk what it serves', async (t) => {
  for (const collection of collections) {
    const tally: Tally = { served: 0, refused: 0, failures: [] };
    check(collection, '', tally);
    for (const [i, a] of pieces.entries()) {
      check(collection, a, tally);
      for (const b of pieces.slice(i + 1)) check(collection, `${a}&${b}`, tally);
    }
    t.same(tally.failures, [], `${collection.name}: ${tally.served} served, ${tally.refused} refused`);
    // The walk reached both outcomes on every collection.
    t.ok(tally.served >= 20 && tally.refused >= 1000, `${collection.name}: served and refused`);
  }
});

t.test('what only a keyset variant refuses costs 1 as well, whatever its chunk would cost', async (t) => {
  const products = `page-size=100&${cursor({ v: 'cursor', c: 'products', s: 'id', f: [['category', 'books']], k: [3] })}`;
  const cases: [string, string, string][] = [
    // Malformed values of before, after and since_id.
    ['events', 'page-size=100&before=2026-02-30T00:00:00Z', 'before'],
    ['events', 'page-size=100&after=yesterday', 'after'],
    ['orders', 'page-size=100&since_id=abc', 'since_id'],
    // since_id with a sort, and a sort or filter beside a cursor that are not the cursor's.
    ['products', 'page-size=100&since_id=3&sort=name', 'since_id,sort'],
    ['products', `${products}&sort=name`, 'cursor'],
    ['products', `${products}&category=toys`, 'cursor'],
    // A correctly signed cursor whose payload is malformed.
    ['orders', `page-size=100&${cursor({ v: 'cursor', c: 'orders', s: 'nope,id', f: [], k: [1, 2] })}`, 'cursor'],
    ['events', `page-size=100&${cursor({ v: 'time', c: 'events', d: 'sideways', p: null, f: [] })}`, 'cursor'],
  ];
  for (const [name, query, named] of cases) {
    const collection = registry.get(name)!;
    const outcome = handle(collection, query);
    const label = `${name}?${query.slice(0, 60)}`;
    t.same(
      outcome.kind === 'refused' ? outcome.error.options.invalidParams?.map((p) => p.name).join(',') : outcome,
      named,
      `${label}: refused, naming ${named}`,
    );
    t.equal(requestCost(collection, query, SECRET), 1, `${label}: charged 1`);
  }
  // Where the order's first key has no index, the chunk costs unindexedSort more; its 400 still costs 1.
  const unindexed = registry.get('unindexed')!;
  const byName = `page-size=20&${cursor({ v: 'cursor', c: 'unindexed', s: '-name,-id', f: [], k: ['x', 5] })}`;
  t.equal(handle(unindexed, byName).kind, 'served');
  t.equal(requestCost(unindexed, byName, SECRET), 251, 'the chunk: 1 + 250');
  t.equal(handle(unindexed, `${byName}&sort=name`).kind, 'refused', "with a sort that is not the cursor's: a 400");
  t.equal(requestCost(unindexed, `${byName}&sort=name`, SECRET), 1, 'charged 1');
});

t.test('property: mixes of up to six parameters agree with the handler too', async (t) => {
  const failures: string[] = [];
  const tally: Tally = { served: 0, refused: 0, failures };
  // Mostly parameters each served alone on the collection (so mixes are often served), sometimes any other.
  const nameOf = (piece: string) => piece.split('=')[0]!;
  const good = new Map<string, string[]>();
  for (const collection of collections) {
    const served = [];
    for (const piece of pieces) if (handle(collection, piece).kind === 'served') served.push(piece);
    good.set(collection.name, served);
  }
  const mixes = fc
    .constantFrom(...registry.keys())
    .chain((name) =>
      fc.tuple(
        fc.constant(name),
        fc.uniqueArray(fc.constantFrom(...good.get(name)!), { selector: nameOf, minLength: 1, maxLength: 5 }),
        fc.option(fc.constantFrom(...pieces), { freq: 3 }),
      ),
    );
  await t.resolves(
    fc.assert(
      fc.asyncProperty(mixes, async ([name, chosen, any]) => {
        failures.length = 0;
        check(registry.get(name)!, [...chosen, ...(any === null ? [] : [any])].join('&'), tally);
        return failures.length === 0;
      }),
      { numRuns: 800 },
    ),
    'no disagreement',
  );
  t.ok(tally.served >= 100 && tally.refused >= 100, `served ${tally.served}, refused ${tally.refused}`);
});

t.test('sizes are charged as they are served: leading zeros change nothing', async (t) => {
  const products = registry.get('products')!;
  const same: [string, string][] = [
    ['limit=005', 'limit=5'],
    ['limit=0100', 'limit=100'],
    [`limit=${'0'.repeat(18)}51`, 'limit=51'],
    ['page=3&page-size=0100', 'page=3&page-size=100'],
    ['page-size=0100', 'page-size=100'],
    ['offset=0999000&count=none', 'offset=999000&count=none'],
    ['page=0500&page-size=100', 'page=500&page-size=100'],
  ];
  for (const [padded, plain] of same) {
    t.equal(requestCost(products, padded, SECRET), requestCost(products, plain, SECRET), `${padded} costs what ${plain} does`);
  }
  t.equal(requestCost(products, 'limit=100', SECRET), 2, 'and the plain one costs its size: 2 for 100 items');
  t.equal(requestCost(registry.get('orders')!, 'page-size=0100', SECRET), 2);
  t.equal(requestCost(undefined, 'limit=100', SECRET), 1, 'no collection: 1');
});

// The rule's arithmetic, case by case (docs/reference/costs.md, "The rule", "Counts").
const demo = demoRegistry();
const productsCollection = demo.get('products')!;
const RULE_SECRET = 'x'.repeat(32);

function cursorOf(payload: Record<string, unknown>): string {
  return encodeCursor(RULE_SECRET, { v: 'cursor', c: 'products', f: [], ...payload });
}

t.test('offsets cost one unit per whole 1,000 rows skipped along an index, 10,000 along the primary key', async (t) => {
  const cases: [string, number][] = [
    ['', 1], // 20 items (1), nothing skipped; the count is priced by its estimate (none here)
    ['count=none&offset=9999', 1], // along the primary key: under 10,000 rows is free
    ['count=none&offset=10000', 2],
    ['offset=999000', 100], // 1 + 99
    ['count=none&sort=name&offset=999', 1],
    ['count=none&sort=name&offset=1000', 2],
    ['sort=-priceCents,name&offset=999000&count=none', 1000], // the storm of issue 11: 1 + 999
    ['sort=-createdAt&offset=100000&limit=100&count=estimated', 102],
    ['page=500&page-size=100&count=none&sort=name', 52], // offset 50,000: 2 + 50
    ['page=500&page-size=100', 7], // offset 50,000 along id: 2 + 5
    ['limit=51&offset=10', 2], // small offsets cost what they did
    ['page=3&page-size=100', 2],
    ['count=none&offset=9007199254740991&sort=name', 2 ** 31 - 1], // within rate_decide's int, capped there
  ];
  for (const [query, cost] of cases) t.equal(requestCost(productsCollection, query, RULE_SECRET), cost, query);
});

t.test('a count costs one unit per whole 5,000 rows it reads, priced from the planner estimate', async (t) => {
  const cases: [string, number, number][] = [
    ['count=exact', 1_000_000, 1 + 200], // an exact count reads the whole filtered set
    ['count=exact', 4_999, 1],
    ['count=exact&limit=100', 50_000, 2 + 10],
    ['', 1_000_000, 1], // the default: over the threshold, the estimate, which reads no rows
    ['', 10_000, 1], // at the threshold: the estimate
    ['', 9_999, 1 + 1], // under it: counted, at most 10,000 rows
    ['count=estimated', 1_000_000, 1],
    ['count=none', 1_000_000, 1],
    ['page=2&page-size=100&count=exact', 250_000, 2 + 50],
  ];
  for (const [query, estimate, cost] of cases)
    t.equal(requestCost(productsCollection, query, RULE_SECRET, estimate), cost, `${query} of ${estimate}`);
});

t.test('keyset chunks skip nothing: their cost does not grow with depth', async (t) => {
  const deep = cursorOf({ s: '-priceCents,name,id', k: [100, 'Amber Anvil 1', 999_000] });
  t.equal(requestCost(productsCollection, 'page-size=20&sort=-priceCents,name', RULE_SECRET), 1);
  t.equal(requestCost(productsCollection, `page-size=100&cursor=${deep}`, RULE_SECRET), 2);
  t.equal(requestCost(demo.get('orders')!, 'page-size=100', RULE_SECRET), 2);
  t.equal(requestCost(demo.get('events')!, 'before=2025-06-01T00:00:00Z', RULE_SECRET), 1);
  t.equal(requestCost(demo.get('events')!, 'since_id=900000&page-size=100', RULE_SECRET), 2);
});

t.test('a malformed query still costs 1, whatever it asks for', async (t) => {
  for (const query of [
    'offset=-1',
    'offset=abc',
    'offset=9007199254740992',
    'count=none&sort=nope&offset=999000',
    'sort=name,name&offset=999000',
    'page=9007199254740991&page-size=100',
    'limit=101&offset=999000',
    'count=maybe&offset=999000',
    'offset=999000&offset=1',
    '%zz',
  ]) {
    t.equal(requestCost(productsCollection, query, RULE_SECRET), 1, query);
  }
  // orders and events offer no offset or page variant: such a request is a 400, not a deep read.
  for (const query of ['offset=999000', 'page=9990&page-size=100', 'limit=100']) {
    t.equal(requestCost(demo.get('orders')!, query, RULE_SECRET), 1, `orders?${query}`);
    t.equal(requestCost(demo.get('events')!, query, RULE_SECRET), 1, `events?${query}`);
  }
});

const withUnindexedName = unindexedFile(`    variants: [offset, cursor]
    defaultVariant: offset
    filters: {}`);

t.test('a sort whose first key has no index costs the surcharge, in every variant', async (t) => {
  const collection = snapshotRegistry(`${withUnindexedName}\n    cost: { unindexedSort: 250 }`, withoutProductIndexes()).get('unindexed')!;
  t.same(collection.cost, { itemsPerUnit: 50, countedPerUnit: 5_000, indexed: { id: 10_000 }, unindexedSort: 250 }, 'its rule');
  t.equal(requestCost(collection, '', RULE_SECRET), 1, 'the default order has an index');
  t.equal(requestCost(collection, 'count=none&sort=name', RULE_SECRET), 251);
  t.equal(requestCost(collection, 'count=none&sort=-name,id&offset=50000', RULE_SECRET), 256, 'the offset as along the slowest index');
  t.equal(requestCost(collection, 'count=none&sort=id,name&offset=50000', RULE_SECRET), 6, 'only the first key decides');
  t.equal(requestCost(collection, 'page-size=20&sort=-name', RULE_SECRET), 251, 'cursor variant, first chunk');
  const cursor = encodeCursor(RULE_SECRET, { v: 'cursor', c: 'unindexed', s: 'name,id', f: [], k: ['x', 1] });
  t.equal(requestCost(collection, `page-size=20&cursor=${cursor}`, RULE_SECRET), 251, 'cursor variant, later chunks');
});

t.test('a file must price every order it offers: its problems, one line each', async (t) => {
  const problems = (yaml: string) => {
    try {
      snapshotRegistry(yaml, withoutProductIndexes());
      return [];
    } catch (error) {
      if (error instanceof CollectionsFileError) return error.problems;
      throw error;
    }
  };
  const line = (problem: string) => `Invalid collections file collections.yaml, collection unindexed: ${problem}`;
  // Without unindexedSorts: true, a sort no index serves is refused (with it, its surcharge defaults to the
  // relation's estimated rows: every order has a price).
  t.same(problems(withUnindexedName.replace('    unindexedSorts: true\n', '')), [
    line('sort by name: no btree index serves it (name, id); add one, or accept it with unindexedSorts: true'),
  ]);
  t.same(problems(`${withUnindexedName}\n    cost: { indexed: { id: 0 } }`), [line('cost.indexed.id must be a whole number from 1')]);
  t.same(problems(`${withUnindexedName}\n    cost: { indexed: { nope: 10 } }`), [
    line('cost.indexed column nope: no such column in demo.products'),
  ]);
});
