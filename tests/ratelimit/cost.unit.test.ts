// The cost rule against the handler, without a database: for every demo collection (and one with a sort no index
// serves) and thousands of queries, a 400 costs 1 and a served chunk costs what it serves. The handler runs for real up to its first query,
// on a stand-in database that records what it is asked for (LIMIT, OFFSET, ORDER BY, an exact count) and
// answers nothing: what it was asked for is what the chunk would have served.
import { sql, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import fc from 'fast-check';
import t from 'tap';
import type { Database } from '../../db/client.ts';
import { products } from '../../db/schema.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { demoRegistry } from '../../lib/pagination/demo-collections.ts';
import { linkBuilder } from '../../lib/pagination/links.ts';
import { parseQueryString, parseSize } from '../../lib/pagination/params.ts';
import { defineCollection, type Collection } from '../../lib/pagination/registry.ts';
import { readQuery } from '../../lib/pagination/serve.ts';
import { requestCost } from '../../lib/ratelimit/cost.ts';

const SECRET = 'cost-unit-secret-0123456789abcdefghij';
// The demo collections, and one whose name sort has no index (README, "Cost": unindexedSort), so that the
// order's first key changes what a chunk costs.
const registry = new Map([
  ...demoRegistry(),
  [
    'unindexed',
    defineCollection({
      name: 'unindexed',
      table: products,
      fields: { id: { column: products.id, type: 'bigint' }, name: { column: products.name, type: 'text' } },
      variants: ['offset', 'page', 'cursor'],
      defaultVariant: 'offset',
      filters: { name: ['eq', 'prefix'] },
      sortKeys: ['id', 'name'],
      defaultSort: 'id',
      pageSize: { default: 20, max: 100 },
      cost: { itemsPerUnit: 50, exactCount: 1, indexed: { id: 10_000 }, unindexedSort: 250 },
    }),
  ],
]);
const collections = [...registry.values()];
const dialect = new PgDialect();

/** Thrown by the stand-in database at the first query: the handler found nothing wrong with the request. */
class WouldQuery {
  constructor(readonly calls: readonly [string, unknown[]][]) {}
}

/** A database whose query builders record every call and whose queries, once awaited, throw WouldQuery. */
function standIn(): Database {
  const calls: [string, unknown[]][] = [];
  const chain: unknown = new Proxy(function builder() {}, {
    get(_target, property) {
      if (typeof property === 'symbol') return undefined;
      if (property === 'then') return (_resolve: unknown, reject: (error: unknown) => void) => reject(new WouldQuery(calls));
      if (property === 'toString' || property === 'valueOf') return () => '(stand-in)';
      return (...args: unknown[]) => {
        calls.push([property, args]);
        return chain;
      };
    },
  });
  return { drizzle: chain, sql: chain } as unknown as Database;
}

/** What the handler would have served: the chunk's size, the rows skipped, the order's first key, an exact count. */
interface Served {
  readonly pageSize: number;
  readonly offset: number;
  readonly firstKey: string;
  readonly exactCount: boolean;
}

type Outcome =
  | { readonly kind: 'served'; readonly served: Served }
  | { readonly kind: 'refused'; readonly stage: 'read'; readonly error: ApiError }
  | { readonly kind: 'refused'; readonly stage: 'variant'; readonly variant: string; readonly error: ApiError; readonly firstKey: string };

function columnNames(collection: Collection): Map<string, string> {
  return new Map([...collection.fields].map(([name, field]) => [dialect.sqlToQuery(sql`${field.column}`).sql, name]));
}
const columnsOf = new Map(collections.map((collection) => [collection.name, columnNames(collection)]));

/** The handler of GET /v1/{collection}, as lib/pagination/serve.ts runs it, up to its first query. */
async function handle(collection: Collection, raw: string): Promise<Outcome> {
  let read: ReturnType<typeof readQuery>;
  let params: ReturnType<typeof parseQueryString>;
  try {
    params = parseQueryString(raw);
    read = readQuery(collection, params, SECRET);
  } catch (error) {
    if (error instanceof ApiError) return { kind: 'refused', stage: 'read', error };
    throw error;
  }
  const { variant, cursor, filters, sort } = read;
  const collectionUrl = `http://unit.test/v1/${collection.name}`;
  try {
    await variant.serve({ collection, params, filters, sort, cursor, cursorSecret: SECRET, database: standIn(), collectionUrl, href: linkBuilder(collectionUrl, params) });
  } catch (error) {
    if (error instanceof ApiError) {
      // The order the refused chunk would have had: the time field, id after since_id, a cursor's own, or the sort.
      const carried = typeof cursor?.s === 'string' ? cursor.s.split(',')[0]!.replace(/^-/, '') : undefined;
      const firstKey = variant.name === 'time' ? collection.timeField! : params.has('since_id') ? 'id' : (carried ?? sort[0]!.field);
      return { kind: 'refused', stage: 'variant', variant: variant.name, error, firstKey };
    }
    if (!(error instanceof WouldQuery)) throw error;
    const first = (name: string) => error.calls.find(([called]) => called === name)?.[1];
    const limit = first('limit')?.[0];
    const order = first('orderBy')?.[0];
    if (typeof limit !== 'number' || order === undefined) throw new Error(`${collection.name}?${raw}: no LIMIT or ORDER BY was asked for`);
    const column = /^("[a-z_]+"\."[a-z_]+") (?:asc|desc)$/.exec(dialect.sqlToQuery(order as SQL).sql)?.[1] ?? '';
    const offset = first('offset')?.[0] ?? 0;
    const exactCount = error.calls.some(([called, args]) => called === 'select' && Object.keys(args[0] as object).join() === 'n');
    return { kind: 'served', served: { pageSize: limit - 1, offset: offset as number, firstKey: columnsOf.get(collection.name)!.get(column)!, exactCount } };
  }
  throw new Error(`${collection.name}?${raw} was served without a query`);
}

/** The rule as the README states it ("Cost"), written out on its own. */
function expectedCost(collection: Collection, served: Served): number {
  const { itemsPerUnit, exactCount, indexed, unindexedSort } = collection.cost;
  const rows = indexed[served.firstKey];
  const skip = rows === undefined ? (unindexedSort ?? 0) + Math.floor(served.offset / Math.min(...Object.values(indexed))) : Math.floor(served.offset / rows);
  return Math.min(Math.ceil(served.pageSize / itemsPerUnit) + (served.exactCount ? exactCount : 0) + skip, 2 ** 31 - 1);
}

const cursor = (payload: Record<string, unknown>) => `cursor=${encodeCursor(SECRET, payload as never)}`;
const T = '2025-01-01T00:00:00.000000Z';
const pieces = [
  'limit=5', 'limit=005', 'limit=0100', 'limit=101', 'limit=abc', `limit=${'0'.repeat(19)}5`, `limit=${'0'.repeat(20)}5`,
  'offset=20', 'offset=10000', 'offset=0999000', 'offset=9007199254740991', 'offset=9007199254740992', 'offset=-5',
  'page=3', 'page=0500', 'page=90071992547409', 'page=x',
  'page-size=020', 'page-size=0100', 'page-size=101',
  'count=exact', 'count=estimated', 'count=none', 'count=maybe',
  'sort=name', 'sort=-priceCents,name', 'sort=-createdAt', 'sort=totalCents', 'sort=nope', 'sort=name,name',
  'since_id=007', 'since_id=abc',
  'before=2026-01-01T00:00:00Z', 'before=2026-02-30T00:00:00Z', 'after=2026-01-01T00:00:00.5+01:00', 'after=yesterday',
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
  'category[in]=toys,books', 'priceCents[gt]=007', 'name[prefix]=A', 'status=paid', 'status[in]=a,,b',
  'totalCents[lt]=x', 'type=click', 'type=login', 'colour=red', '%zz', 'limit=5&limit=5',
];

interface Tally {
  served: number;
  readRefusals: number;
  variantRefusals: Map<string, number>;
  failures: string[];
}

/** Checks one query against the rule; returns what is wrong, if anything. */
async function check(collection: Collection, raw: string, tally: Tally): Promise<void> {
  const label = `${collection.name}?${raw.length > 120 ? `${raw.slice(0, 120)}…` : raw}`;
  const cost = requestCost(collection, raw, SECRET);
  const outcome = await handle(collection, raw);
  if (outcome.kind === 'served') {
    tally.served++;
    const expected = expectedCost(collection, outcome.served);
    if (cost !== expected) tally.failures.push(`${label}: serves ${JSON.stringify(outcome.served)}, costs ${cost}, not ${expected}`);
    return;
  }
  if (outcome.stage === 'read' || outcome.variant === 'offset' || outcome.variant === 'page') {
    tally.readRefusals++;
    if (cost !== 1) tally.failures.push(`${label}: a 400 (${outcome.error.detail}) costs ${cost}`);
    return;
  }
  // The README's one gap ("Cost"): what only the keyset variant itself refuses is charged like its chunk,
  // by its page-size (when that is what is wrong, the request costs 1) and the first key of its order.
  let expected = 1;
  try {
    const pageSize = parseSize(parseQueryString(raw), 'page-size', collection.pageSize);
    expected = expectedCost(collection, { pageSize, offset: 0, firstKey: outcome.firstKey, exactCount: false });
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
  }
  if (cost !== expected) tally.failures.push(`${label}: a keyset variant's 400 (${outcome.error.detail}) costs ${cost}, not its chunk's ${expected}`);
  if (cost > 1) {
    const names = (outcome.error.options.invalidParams ?? []).map((p) => p.name).join(',');
    tally.variantRefusals.set(names, (tally.variantRefusals.get(names) ?? 0) + 1);
  }
}

const tallies = new Map<string, Tally>();

// Thousands of refusals each build an ApiError, whose stack trace is most of the walk's time: none is
// looked at here (a failure reports the query and its detail), so none is captured.
const stackTraceLimit = Error.stackTraceLimit;
Error.stackTraceLimit = 0;
t.teardown(() => {
  Error.stackTraceLimit = stackTraceLimit;
});

t.test('every single parameter and every pair, on every collection: a 400 costs 1, a chunk what it serves', async (t) => {
  for (const collection of collections) {
    const tally: Tally = { served: 0, readRefusals: 0, variantRefusals: new Map(), failures: [] };
    tallies.set(collection.name, tally);
    await check(collection, '', tally);
    for (const [i, a] of pieces.entries()) {
      await check(collection, a, tally);
      for (const b of pieces.slice(i + 1)) await check(collection, `${a}&${b}`, tally);
    }
    t.same(tally.failures, [], `${collection.name}: ${tally.served} served, ${tally.readRefusals} refused before any keyset rule, ${[...tally.variantRefusals.values()].reduce((a, b) => a + b, 0)} by a keyset variant`);
    // The walk reached every kind of outcome the collection has.
    t.ok(tally.served >= 20 && tally.readRefusals >= 1000 && tally.variantRefusals.size > 0, `${collection.name}: served, refused, and refused by a keyset variant at a cost above 1`);
  }
  // The keyset refusals charged above 1 are those of the next test, and no other kind.
  const names = new Set([...tallies.values()].flatMap((tally) => [...tally.variantRefusals.keys()]));
  t.same([...names].sort(), ['after', 'before', 'cursor', 'since_id'], [...names].join(' | '));
});

t.test("the README's gap: what only a keyset variant refuses is charged like its chunk", async (t) => {
  const products = `page-size=100&${cursor({ v: 'cursor', c: 'products', s: 'id', f: [['category', 'books']], k: [3] })}`;
  const cases: [string, string, string, string][] = [
    // Documented: malformed values of before, after and since_id.
    ['events', 'page-size=100&before=2026-02-30T00:00:00Z', 'time', 'before'],
    ['events', 'page-size=100&after=yesterday', 'time', 'after'],
    ['orders', 'page-size=100&since_id=abc', 'cursor', 'since_id'],
    // The same gap, beyond the README's list: since_id with a sort, and a sort or filter beside a cursor that are not the cursor's.
    ['products', 'page-size=100&since_id=3&sort=name', 'cursor', 'since_id,sort'],
    ['products', `${products}&sort=name`, 'cursor', 'cursor'],
    ['products', `${products}&category=toys`, 'cursor', 'cursor'],
  ];
  for (const [name, query, variant, named] of cases) {
    const collection = registry.get(name)!;
    const outcome = await handle(collection, query);
    const label = `${name}?${query.slice(0, 60)}`;
    t.same(outcome.kind === 'refused' && outcome.stage === 'variant' ? [outcome.variant, outcome.error.options.invalidParams?.map((p) => p.name).join(',')] : outcome, [variant, named], `${label}: refused by the ${variant} variant`);
    t.equal(requestCost(collection, query, SECRET), 2, `${label}: charged 2`);
    t.equal(requestCost(collection, query.replace('page-size=100', 'page-size=50'), SECRET), 1, 'and 1 for a chunk of 50');
  }
  // Like its chunk: where the order's first key has no index, that is unindexedSort more, not "at most 2 units".
  const unindexed = registry.get('unindexed')!;
  const byName = `page-size=20&${cursor({ v: 'cursor', c: 'unindexed', s: '-name,-id', f: [], k: ['x', 5] })}`;
  t.equal((await handle(unindexed, byName)).kind, 'served');
  t.equal(requestCost(unindexed, byName, SECRET), 251, 'the chunk: 1 + 250');
  t.same((await handle(unindexed, `${byName}&sort=name`)).kind, 'refused', 'with a sort that is not the cursor\'s: a 400');
  t.equal(requestCost(unindexed, `${byName}&sort=name`, SECRET), 251, 'charged 251 all the same');
});

t.test('property: mixes of up to six parameters agree with the handler too', async (t) => {
  const failures: string[] = [];
  const tally: Tally = { served: 0, readRefusals: 0, variantRefusals: new Map(), failures };
  // Mostly parameters each served alone on the collection (so mixes are often served), sometimes any other.
  const nameOf = (piece: string) => piece.split('=')[0]!;
  const good = new Map<string, string[]>();
  for (const collection of collections) {
    const served = [];
    for (const piece of pieces) if ((await handle(collection, piece)).kind === 'served') served.push(piece);
    good.set(collection.name, served);
  }
  const mixes = fc.constantFrom(...registry.keys()).chain((name) =>
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
        await check(registry.get(name)!, [...chosen, ...(any === null ? [] : [any])].join('&'), tally);
        return failures.length === 0;
      }),
      { numRuns: 800 },
    ),
    'no disagreement',
  );
  t.ok(tally.served >= 100 && tally.readRefusals >= 100, `served ${tally.served}, refused ${tally.readRefusals}`);
});

t.test('sizes are charged as they are served: leading zeros change nothing', async (t) => {
  const products = registry.get('products')!;
  const same: [string, string][] = [
    ['limit=005', 'limit=5'], ['limit=0100', 'limit=100'], [`limit=${'0'.repeat(18)}51`, 'limit=51'], ['page=3&page-size=0100', 'page=3&page-size=100'],
    ['page-size=0100', 'page-size=100'], ['offset=0999000&count=none', 'offset=999000&count=none'], ['page=0500&page-size=100', 'page=500&page-size=100'],
  ];
  for (const [padded, plain] of same) {
    t.equal(requestCost(products, padded, SECRET), requestCost(products, plain, SECRET), `${padded} costs what ${plain} does`);
  }
  t.equal(requestCost(products, 'limit=100', SECRET), 3, 'and the plain one costs its size: 2 for 100 items, 1 for the exact count');
  t.equal(requestCost(registry.get('orders')!, 'page-size=0100', SECRET), 2);
  t.equal(requestCost(undefined, 'limit=100', SECRET), 1, 'no collection: 1');
});
