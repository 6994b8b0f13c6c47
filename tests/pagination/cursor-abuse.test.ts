// Cursor abuse: altered, truncated, forged, foreign or mismatched cursors are a 400 invalid_cursor, never a 500.
import t, { type Test } from 'tap';
import { encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { pathOf, type TestApp, testApp } from '../helpers/app.ts';

const SECRET = 'keyset-tests-secret-0123456789abcdef';

async function nextCursor(app: TestApp, path: string): Promise<string> {
  const { status, body } = await app.json(path);
  if (status !== 200 || !body._links.next) throw new Error(`${path}: no next link (${status})`);
  return new URL(body._links.next.href).searchParams.get('cursor')!;
}

async function expectInvalidCursor(t: Test, app: TestApp, path: string, why: string) {
  const { status, body, headers } = await app.json(path);
  t.equal(status, 400, why);
  t.equal(body?.code, 'invalid_cursor', why);
  t.equal(headers.get('content-type'), 'application/problem+json', why);
  t.match(body?.detail, /^Invalid cursor: \S/, why);
}

t.test('every character of a cursor altered, and every truncation, is a 400 invalid_cursor', async (t) => {
  const app = await testApp(t, { seed: { products: 60, events: 60 } });
  const cursors = [
    { path: '/v1/products?page-size=5&sort=-priceCents,name&category[in]=books,toys', rel: 'products' },
    { path: '/v1/events?page-size=5&type=login', rel: 'events' },
  ];
  for (const { path } of cursors) {
    const cursor = await nextCursor(app, path);
    const base = path.split('?')[0];
    let statuses = new Map<string, number>();
    for (let i = 0; i < cursor.length; i++) {
      // Flip the low bit of one character: stays printable, so the query string itself is valid.
      const altered = cursor.slice(0, i) + String.fromCharCode(cursor.charCodeAt(i) ^ 1) + cursor.slice(i + 1);
      const { status, body } = await app.json(`${base}?cursor=${encodeURIComponent(altered)}`);
      const key = `${status} ${body?.code}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    }
    t.same([...statuses.keys()], ['400 invalid_cursor'], `${cursor.length} altered cursors of ${base}`);
    statuses = new Map();
    for (let length = 1; length < cursor.length; length++) {
      const { status, body } = await app.json(`${base}?cursor=${encodeURIComponent(cursor.slice(0, length))}`);
      const key = `${status} ${body?.code}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    }
    t.same([...statuses.keys()], ['400 invalid_cursor'], `${cursor.length - 1} truncated cursors of ${base}`);
    t.equal((await app.json(`${base}?cursor=${cursor}`)).status, 200, 'the cursor itself is good');
  }
});

t.test('garbage, forged and foreign cursors', async (t) => {
  const app = await testApp(t, { seed: { products: 60, orders: 60, events: 60 }, env: { CURSOR_SECRET: SECRET } });
  const good = await nextCursor(app, '/v1/products?page-size=5');
  const [version, body, signature] = good.split('.') as [string, string, string];
  const garbage = [
    'x',
    'v1',
    'v1..',
    'v1.e30.',
    `${version}.${body}`,
    `${version}.${body}.${signature}.${signature}`,
    `v2.${body}.${signature}`,
    `v1.${body}=.${signature}`,
    `v1.${body}.${signature}=`,
    `v1.${Buffer.from('{"v":"cursor"').toString('base64url')}.${signature}`,
    'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    Buffer.from('{"v":"cursor","c":"products","k":[1]}').toString('base64'),
    `v1.${'A'.repeat(5000)}.${signature}`,
    '%F0%9F%92%A9',
    'v1.%00.x',
  ];
  for (const cursor of garbage) {
    const encoded = cursor.includes('%') ? cursor : encodeURIComponent(cursor);
    const { status, body: problem } = await app.json(`/v1/products?cursor=${encoded}`);
    t.equal(status, 400, cursor.slice(0, 40));
    t.ok(
      problem.code === 'invalid_cursor' || (problem.code === 'invalid_parameter' && /NUL/.test(problem.detail)),
      `${cursor.slice(0, 40)}: invalid_cursor, or invalid_parameter for a NUL (${problem.code}: ${problem.detail})`,
    );
  }

  // Signed with another secret: a forgery.
  const forged = encodeCursor('another-secret-of-at-least-32-chars!', { v: 'cursor', c: 'products', s: 'id', f: [], k: [10] });
  await expectInvalidCursor(t, app, `/v1/products?cursor=${forged}`, 'another secret');

  // Signed with the right secret but with a payload this service never issues: still a 400.
  const odd: Record<string, unknown>[] = [
    { v: 'cursor', c: 'products' },
    { v: 'cursor', c: 'products', s: 'id', f: [], k: ['ten'] },
    { v: 'cursor', c: 'products', s: 'id', f: [], k: [10, 11] },
    { v: 'cursor', c: 'products', s: 'id', f: [], k: [1e300] },
    { v: 'cursor', c: 'products', s: 'name', f: [], k: ['a'] },
    { v: 'cursor', c: 'products', s: 'nope,id', f: [], k: [1, 1] },
    { v: 'cursor', c: 'products', s: 'id,id', f: [], k: [1, 1] },
    { v: 'cursor', c: 'products', s: 'createdAt,id', f: [], k: ['2026-01-01 00:00:00', 1] },
    { v: 'cursor', c: 'products', s: 'id', f: {}, k: [10] },
    { v: 'cursor', c: 'products', s: 'id', f: [['category', 5]], k: [10] },
    { v: 'cursor', c: 'products', s: 'id', f: [['priceCents[lt]', 'cheap']], k: [10] },
    { v: 'cursor', c: 'products', s: 'id', f: [['colour', 'red']], k: [10] },
    {
      v: 'cursor',
      c: 'products',
      s: 'id',
      f: [
        ['category', 'a'],
        ['category', 'b'],
      ],
      k: [10],
    },
    { v: 'offset', c: 'products', s: 'id', f: [], k: [10] },
    { v: 'time', c: 'products', d: 'older', p: null, f: [] },
  ];
  for (const payload of odd) {
    const path = `/v1/products?cursor=${encodeCursor(SECRET, payload as never)}`;
    const { status, body: problem } = await app.json(path);
    t.equal(status, 400, JSON.stringify(payload));
    t.equal(problem.code, 'invalid_cursor', JSON.stringify(payload));
  }
  const oddTime: Record<string, unknown>[] = [
    { v: 'time', c: 'events', d: 'sideways', p: null, f: [] },
    { v: 'time', c: 'events', d: 'older', p: ['2026-01-01T00:00:00.000000Z'], f: [] },
    { v: 'time', c: 'events', d: 'older', p: ['2026-01-01', 1], f: [] },
    { v: 'time', c: 'events', d: 'older', p: ['2026-01-01T00:00:00.000000Z', '*'], f: [] },
    { v: 'time', c: 'events', d: 'newer', p: ['2026-01-01T00:00:00.000000Z', 1.5], f: [] },
    { v: 'time', c: 'events', d: 'newer', p: null },
  ];
  for (const payload of oddTime) {
    await expectInvalidCursor(t, app, `/v1/events?cursor=${encodeCursor(SECRET, payload as never)}`, JSON.stringify(payload));
  }
  // The demo's time cursors of an earlier release carried the id as a number: still served, as the same chunk.
  const next = await nextCursor(app, '/v1/events?page-size=5');
  const payload = JSON.parse(Buffer.from(next.split('.')[1]!, 'base64url').toString('utf8'));
  const [at, [id]] = payload.p as [string, [string | number]];
  const earlier = encodeCursor(SECRET, { ...payload, p: [at, Number(id)] });
  const [now, then] = await Promise.all([app.json(`/v1/events?cursor=${next}`), app.json(`/v1/events?cursor=${earlier}`)]);
  t.equal(then.status, 200, "an earlier release's events cursor");
  t.same(then.body.events, now.body.events, 'the same chunk as the cursor issued now');
  t.ok(then.body.events.length > 0);
  // A well-formed one is served: the checks above reject the payloads, not the signing.
  const wellFormed = encodeCursor(SECRET, { v: 'cursor', c: 'products', s: 'id', f: [['category', 'books']], k: [10] });
  t.equal((await app.json(`/v1/products?cursor=${wellFormed}`)).status, 200);
});

t.test('a cursor belongs to its collection and its query', async (t) => {
  const app = await testApp(t, { seed: { products: 60, orders: 60, events: 60 } });
  const products = await nextCursor(app, '/v1/products?page-size=5&category=books&sort=-name');
  const orders = await nextCursor(app, '/v1/orders?page-size=5');
  const events = await nextCursor(app, '/v1/events?page-size=5');

  await expectInvalidCursor(t, app, `/v1/orders?cursor=${products}`, 'a products cursor on orders');
  await expectInvalidCursor(t, app, `/v1/events?cursor=${orders}`, 'an orders cursor on events');
  await expectInvalidCursor(t, app, `/v1/products?cursor=${events}`, 'an events cursor on products');
  const foreign = await app.json(`/v1/orders?cursor=${products}`);
  t.match(foreign.body.detail, /another collection/);

  await expectInvalidCursor(t, app, `/v1/products?cursor=${products}&category=toys`, 'another filter value');
  await expectInvalidCursor(t, app, `/v1/products?cursor=${products}&priceCents[lt]=500`, 'an extra filter');
  await expectInvalidCursor(t, app, `/v1/products?cursor=${products}&category[in]=books,toys`, 'another operator');
  await expectInvalidCursor(t, app, `/v1/products?cursor=${products}&sort=name`, 'another sort');
  await expectInvalidCursor(t, app, `/v1/products?cursor=${products}&sort=-name,-createdAt`, 'a longer sort');
  const mismatch = await app.json(`/v1/products?cursor=${products}&category=toys`);
  t.match(mismatch.body.detail, /category=toys is not part of the query the cursor belongs to/);

  // The same filter and sort beside it are fine, in any spelling that normalises to them; page-size may change.
  for (const extra of [
    '',
    '&category=books',
    '&category[eq]=books',
    '&sort=-name',
    '&sort=-name,-id',
    '&category=books&sort=-name&page-size=9',
  ]) {
    const size = extra.includes('page-size') ? '' : '&page-size=5';
    const { status, body } = await app.json(`/v1/products?cursor=${products}${extra}${size}`);
    t.equal(status, 200, extra || 'nothing beside');
    t.not(body.products.length, 0, `${extra}: the chunk after the cursor's has items`);
    t.same(
      body.products.filter((p: { category: string }) => p.category !== 'books'),
      [],
      `${extra}: books only`,
    );
  }

  // Parameters of another variant, or ones the cursor variant does not take: 400 invalid_parameter.
  for (const extra of ['offset=5', 'limit=5', 'page=1', 'since_id=3', 'before=2026-01-01T00:00:00Z', 'count=exact', 'colour=red']) {
    const { status, body } = await app.json(`/v1/products?cursor=${products}&${extra}`);
    t.equal(status, 400, extra);
    t.equal(body.code, 'invalid_parameter', extra);
  }
  const timeWithSort = await app.json(`/v1/events?cursor=${events}&sort=id`);
  t.equal(timeWithSort.status, 400);
});

t.test('since_id: ascending ids after it, next continues; it takes no sort', async (t) => {
  const app = await testApp(t, { seed: { products: 60, orders: 30, events: 30 } });
  const first = await app.json('/v1/products?since_id=41&page-size=7&category[in]=books,toys,tools,games,garden,kitchen,music,outdoor');
  t.equal(first.status, 200);
  t.same(
    first.body.products.map((p: { id: number }) => p.id),
    [42, 43, 44, 45, 46, 47, 48],
  );
  t.equal(
    first.body._links.self.href,
    'http://test.local/v1/products?page-size=7&since_id=41&category%5Bin%5D=books,toys,tools,games,garden,kitchen,music,outdoor',
  );
  t.match(
    first.body._links.next.href,
    /^http:\/\/test\.local\/v1\/products\?page-size=7&cursor=[\w.-]+$/,
    'the filters travel in the cursor',
  );
  const second = await app.json(pathOf(first.body._links.next.href));
  t.same(
    second.body.products.map((p: { id: number }) => p.id),
    [49, 50, 51, 52, 53, 54, 55],
  );
  const third = await app.json(pathOf(second.body._links.next.href));
  t.same(
    third.body.products.map((p: { id: number }) => p.id),
    [56, 57, 58, 59, 60],
  );
  t.notOk(third.body._links.next, 'no next on the last chunk');
  t.same((await app.json('/v1/products?since_id=60')).body.products, []);
  t.notOk((await app.json('/v1/products?since_id=60')).body._links.next, 'no next on an empty chunk');
  t.same(
    (await app.json('/v1/events?since_id=28')).body.events.map((e: { id: number }) => e.id),
    [29, 30],
  );
  t.same(
    (await app.json('/v1/orders?since_id=0&page-size=2')).body.orders.map((o: { id: number }) => o.id),
    [1, 2],
  );

  t.same((await app.json('/v1/products?since_id=9007199254740993')).body.products, [], 'an id past 2^53 is read exactly');
  for (const query of [
    'since_id=5&sort=name',
    'since_id=-1',
    'since_id=abc',
    'since_id=1.5',
    'since_id=9223372036854775808', // past bigint; below it, past 2^53 too, ids are exact
    'since_id=5&page=1',
    'since_id=5&count=none',
  ]) {
    const { status, body } = await app.json(`/v1/products?${query}`);
    t.equal(status, 400, query);
    t.equal(body.code, 'invalid_parameter', query);
  }
});
