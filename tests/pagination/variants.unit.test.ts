// Choosing the variant, without a database: the table of parameters walked for every demo collection.
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import { encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { readQuery } from '../../lib/pagination/prepare.ts';
import type { Collection, VariantName } from '../../lib/pagination/registry.ts';
import { checkParamsTaken, POSITION_PARAMS, takes, variantParams } from '../../lib/pagination/variant-params.ts';
import { selectVariant } from '../../lib/pagination/variants.ts';
import { snapshotRegistry } from '../helpers/collections.ts';
import { conflicting, invalidCursor, invalidParameter, problemOf } from '../helpers/problem.ts';

const SECRET = 'variants-unit-secret-0123456789abcdef';
const registry = demoRegistry();
const collections = [...registry.values()];

// The rules as the README states them ("Using the API", "Keyset pagination"), written out here on their own.
const offered: Record<string, { variants: VariantName[]; default: VariantName; keyset: VariantName }> = {
  products: { variants: ['offset', 'page', 'cursor'], default: 'offset', keyset: 'cursor' },
  orders: { variants: ['cursor'], default: 'cursor', keyset: 'cursor' },
  events: { variants: ['time', 'cursor'], default: 'time', keyset: 'time' },
};
const spec: Record<VariantName, string[]> = {
  offset: ['limit', 'offset', 'sort', 'count'],
  page: ['page', 'page-size', 'sort', 'count'],
  cursor: ['page-size', 'cursor', 'since_id', 'sort'],
  time: ['page-size', 'cursor', 'before', 'after'],
};
/** The parameters that pick a variant by their presence, and the family each belongs to. */
const family: Record<string, VariantName | 'cursor-token'> = {
  limit: 'offset',
  offset: 'offset',
  page: 'page',
  since_id: 'cursor',
  before: 'time',
  after: 'time',
  cursor: 'cursor-token',
};
const allParams = [...new Set(Object.values(spec).flat())];
const value = (name: string) => (name === 'before' || name === 'after' ? '2026-01-01T00:00:00Z' : name === 'cursor' ? 'x' : '1');
const query = (...names: string[]) => new Map(names.map((name) => [name, value(name)]));
const sorted = (names: readonly string[]) => [...names].sort();

t.test('the demo collections offer what the README says; the table of parameters is the documented one', async (t) => {
  for (const collection of collections) {
    t.same(collection.variants, offered[collection.name]!.variants, `${collection.name} variants`);
    t.equal(collection.defaultVariant, offered[collection.name]!.default, `${collection.name} default`);
  }
  t.same(Object.keys(offered).sort(), [...registry.keys()].sort());
  for (const [variant, names] of Object.entries(spec) as [VariantName, string[]][]) {
    t.same(sorted(variantParams[variant].takes), sorted(names), `${variant} takes`);
    for (const name of allParams)
      t.equal(takes(variant, name), names.includes(name), `${variant} ${names.includes(name) ? 'takes' : 'does not take'} ${name}`);
  }
  t.same(
    sorted([...POSITION_PARAMS]),
    sorted(['limit', 'offset', 'page', 'page-size', 'cursor', 'since_id', 'before', 'after']),
    'all but sort and count position a chunk',
  );
});

t.test('no parameter: the default variant; page-size alone: the keyset variant', async (t) => {
  for (const collection of collections) {
    const expected = offered[collection.name]!;
    t.same(selectVariant(collection, new Map(), SECRET), { variant: expected.default, cursor: undefined }, `${collection.name}`);
    t.same(
      selectVariant(collection, query('page-size'), SECRET),
      { variant: expected.keyset, cursor: undefined },
      `${collection.name}?page-size`,
    );
    t.same(
      selectVariant(
        collection,
        new Map([
          ['page-size', '5'],
          ['sort', 'id'],
          ['count', 'none'],
          ['status', 'x'],
        ]),
        SECRET,
      ).variant,
      expected.keyset,
      `${collection.name}: sort, count and filters pick nothing`,
    );
    t.same(
      selectVariant(
        collection,
        new Map([
          ['sort', 'id'],
          ['count', 'none'],
        ]),
        SECRET,
      ).variant,
      expected.default,
      `${collection.name}: nor without page-size`,
    );
  }
});

t.test('each selecting parameter alone picks its variant, or is a 400 naming it when the collection lacks it', async (t) => {
  for (const collection of collections) {
    const { variants } = offered[collection.name]!;
    for (const [name, variant] of Object.entries(family)) {
      if (variant === 'cursor-token') continue;
      const label = `${collection.name}?${name}`;
      const outcome = problemOf(() => selectVariant(collection, query(name), SECRET));
      if (variants.includes(variant)) {
        t.equal(outcome, 'no error', label);
        t.equal(selectVariant(collection, query(name), SECRET).variant, variant, label);
        if (name !== 'page') t.equal(selectVariant(collection, query(name, 'page-size'), SECRET).variant, variant, `${label}&page-size`);
      } else {
        t.same(
          outcome,
          conflicting([name], `${collection.name} does not offer ${variant} pagination; it offers ${variants.join(', ')}`),
          label,
        );
      }
    }
    const both = problemOf(() => selectVariant(collection, query('limit', 'offset'), SECRET));
    if (variants.includes('offset')) t.equal(both, 'no error', `${collection.name}: limit and offset are one family`);
    else
      t.same(
        both,
        conflicting(['limit', 'offset'], `${collection.name} does not offer offset pagination; it offers ${variants.join(', ')}`),
        `${collection.name}: both named`,
      );
  }
});

t.test('a cursor picks the variant that issued it, if the collection offers it; a foreign one is an invalid cursor', async (t) => {
  for (const collection of collections) {
    for (const variant of ['cursor', 'time'] as const) {
      const payload = { v: variant, c: collection.name, extra: [1, 'two'] };
      const params = new Map([['cursor', encodeCursor(SECRET, payload)]]);
      const label = `${collection.name}: a ${variant} cursor`;
      if (offered[collection.name]!.variants.includes(variant))
        t.same(selectVariant(collection, params, SECRET), { variant, cursor: payload }, label);
      else
        t.same(
          problemOf(() => selectVariant(collection, params, SECRET)),
          invalidCursor(`it names ${variant} pagination, which ${collection.name} does not offer`),
          label,
        );
    }
    const foreign = encodeCursor(SECRET, { v: 'cursor', c: collection.name === 'orders' ? 'products' : 'orders' });
    t.same(
      problemOf(() => selectVariant(collection, new Map([['cursor', foreign]]), SECRET)),
      invalidCursor('it belongs to another collection'),
      `${collection.name}: another collection's cursor`,
    );
    t.same(
      problemOf(() =>
        selectVariant(collection, new Map([['cursor', encodeCursor('another secret', { v: 'cursor', c: collection.name })]]), SECRET),
      ),
      invalidCursor('signature does not match'),
      `${collection.name}: another secret`,
    );
  }
});

t.test('parameters of two families are a 400 naming every one of them, before anything else is looked at', async (t) => {
  const reason = 'belong to different pagination variants and cannot be combined';
  const names = Object.keys(family);
  for (const collection of collections) {
    for (const [i, a] of names.entries()) {
      for (const b of names.slice(i + 1)) {
        const params = query(a, b, 'page-size');
        const label = `${collection.name}?${a}&${b}`;
        const outcome = problemOf(() => selectVariant(collection, params, SECRET));
        if (family[a] === family[b]) {
          if (a === 'before' && b === 'after')
            t.same(
              outcome,
              conflicting(['before', 'after'], 'cannot be combined; before moves to older items, after to newer ones'),
              label,
            );
          continue;
        }
        // The cursor ("x") is never read, and a family the collection lacks is not the complaint.
        t.not(outcome, 'no error', label);
        if (outcome === 'no error') continue;
        t.same(
          { ...outcome, invalid_params: sorted(outcome.invalid_params!.map((p) => p.name)) },
          { ...conflicting([], reason), invalid_params: sorted([a, b]) },
          label,
        );
        t.same(
          outcome.invalid_params!.map((p) => p.reason),
          [reason, reason],
          `${label}: the reason`,
        );
      }
    }
    const three = problemOf(() => selectVariant(collection, query('offset', 'page', 'since_id', 'after'), SECRET));
    t.same(
      three === 'no error' ? three : sorted(three.invalid_params!.map((p) => p.name)),
      sorted(['offset', 'page', 'since_id', 'after']),
      `${collection.name}: four families, four names`,
    );
  }
});

t.test('checkParamsTaken: a parameter of another variant, and an unknown one, are named for what they are', async (t) => {
  const notFilter = () => false;
  for (const variant of Object.keys(spec) as VariantName[]) {
    checkParamsTaken(variant, spec[variant], notFilter);
    t.pass(`${variant} takes ${spec[variant].join(', ')}`);
    for (const name of allParams.filter((param) => !spec[variant].includes(param))) {
      t.same(
        problemOf(() => checkParamsTaken(variant, [...spec[variant], name], notFilter)),
        invalidParameter(name, `is not a parameter of ${variant} pagination`),
        `${variant}: ${name}`,
      );
    }
    for (const name of ['colour', 'Limit', 'page_size', 'pagesize', 'limit[gt]', 'sort[asc]', 'count ', ' ']) {
      t.same(
        problemOf(() => checkParamsTaken(variant, [name], notFilter)),
        invalidParameter(name, 'is not a known parameter'),
        `${variant}: ${JSON.stringify(name)}`,
      );
    }
    t.equal(
      problemOf(() => checkParamsTaken(variant, ['category', 'name[prefix]'], (name) => name === 'category' || name === 'name[prefix]')),
      'no error',
      `${variant}: filters`,
    );
    t.same(
      problemOf(() => checkParamsTaken(variant, ['zzz', 'colour'], notFilter)),
      invalidParameter('zzz', 'is not a known parameter'),
      `${variant}: the first one is named`,
    );
  }
});

// A query that picks each variant on each collection by a parameter of its family, to which one more parameter is added.
const picks: Record<string, Partial<Record<VariantName, [string, string][]>>> = {
  products: { offset: [['limit', '5']], page: [['page', '1']], cursor: [['since_id', '1']] },
  orders: { cursor: [['since_id', '1']] },
  events: { time: [['before', '2026-01-01T00:00:00Z']], cursor: [['since_id', '1']] },
};

t.test('readQuery on every collection and variant: one parameter more is taken, conflicts, or is named as not taken', async (t) => {
  for (const collection of collections) {
    for (const [variant, pick] of Object.entries(picks[collection.name]!) as [VariantName, [string, string][]][]) {
      t.equal(readQuery(collection, new Map(pick), SECRET).variant.name, variant, `${collection.name}: ${pick[0]![0]} picks ${variant}`);
      for (const name of [...allParams, 'colour']) {
        if (pick.some(([taken]) => taken === name)) continue;
        const params = new Map([...pick, [name, name === 'sort' ? 'id' : name === 'count' ? 'none' : value(name)]]);
        const label = `${collection.name}?${[...params.keys()].join('&')}`;
        const outcome = problemOf(() => readQuery(collection, params, SECRET));
        const selectors = [...params.keys()].filter((param) => param in family);
        if (new Set(selectors.map((param) => family[param])).size > 1) {
          t.same(
            outcome === 'no error' ? outcome : sorted(outcome.invalid_params!.map((p) => p.name)),
            sorted(selectors),
            `${label}: conflict`,
          );
        } else if (params.has('before') && params.has('after')) {
          t.same(outcome, conflicting(['before', 'after'], 'cannot be combined; before moves to older items, after to newer ones'), label);
        } else if (name === 'colour') {
          t.same(outcome, invalidParameter('colour', 'is not a known parameter'), label);
        } else if (!spec[variant].includes(name)) {
          t.same(outcome, invalidParameter(name, `is not a parameter of ${variant} pagination`), label);
        } else if (name === 'sort' && collection.sortKeys.length === 0) {
          t.same(outcome, invalidParameter('sort', 'is not offered by this collection'), label);
        } else if (name === 'sort' && params.has('since_id')) {
          // Read by the cursor variant itself, before the database: a 400 like every other.
          t.same(outcome, conflicting(['since_id', 'sort'], 'cannot be combined; since_id returns items in ascending id order'), label);
        } else {
          t.equal(outcome, 'no error', label);
        }
      }
    }
  }
});

t.test('readQuery returns the variant, the parsed filters and the sort with its tie-breaker', async (t) => {
  const products = registry.get('products')!;
  const read = readQuery(
    products,
    new Map([
      ['sort', '-name'],
      ['category[in]', 'toys,books,toys'],
      ['limit', '5'],
    ]),
    SECRET,
  );
  t.equal(read.variant.name, 'offset');
  t.same(read.request.filters, [{ field: 'category', op: 'in', values: ['books', 'toys'] }]);
  t.same(read.request.sort, [
    { field: 'name', descending: true },
    { field: 'id', descending: true },
  ]);
  t.equal(read.request.cursor, undefined);
  t.same(read.plan, { pageSize: 5, offset: 0, count: 'auto', firstKey: 'name' }, 'the plan of the chunk');
  const events = readQuery(registry.get('events')!, new Map([['type', 'click']]), SECRET);
  t.equal(events.variant.name, 'time');
  t.same(
    events.request.sort,
    [
      { field: 'occurredAt', descending: true },
      { field: 'id', descending: true },
    ],
    'the time variant takes no sort: the default one',
  );
  const payload = { v: 'cursor' as const, c: 'orders', s: 'id', f: [], k: [3] };
  const orders = readQuery(registry.get('orders')!, new Map([['cursor', encodeCursor(SECRET, payload)]]), SECRET);
  t.equal(orders.variant.name, 'cursor');
  t.same(orders.request.cursor, payload);
  t.same(
    problemOf(() => readQuery(registry.get('orders')!, new Map([['status[gt]', 'paid']]), SECRET)),
    invalidParameter('status[gt]', 'is not a supported filter; status takes status=, status[in]='),
  );
});

t.test(
  'collections beyond the demo ones: page-size alone picks page without a keyset variant, and is named when there is none',
  async (t) => {
    const declare = (name: string, variants: VariantName[], defaultVariant: VariantName): Collection =>
      snapshotRegistry(`
collections:
  - relation: demo.products
    name: ${name}
    fieldNames: camelCase
    columns: [id, created_at]
    variants: [${variants.join(', ')}]
    defaultVariant: ${defaultVariant}
    ${variants.includes('time') ? 'timeColumn: created_at' : ''}
    filters: {}
    sort: [id]
    order: id
`).get(name)!;
    t.equal(selectVariant(declare('paged', ['offset', 'page'], 'offset'), query('page-size'), SECRET).variant, 'page');
    t.equal(
      selectVariant(declare('both', ['cursor', 'time'], 'cursor'), query('page-size'), SECRET).variant,
      'cursor',
      'the default keyset variant',
    );
    t.equal(selectVariant(declare('timed', ['cursor', 'time'], 'time'), query('page-size'), SECRET).variant, 'time');
    t.same(
      problemOf(() => selectVariant(declare('plain', ['offset'], 'offset'), query('page-size'), SECRET)),
      conflicting(['page-size'], 'plain does not offer page pagination; it offers offset'),
    );
  },
);
