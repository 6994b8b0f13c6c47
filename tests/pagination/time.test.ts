// The time variant on events: ties on one timestamp, prev and poll links, microseconds, before/after parsing.
import t from 'tap';
import { pathOf, type TestApp, testApp } from '../helpers/app.ts';
import { followNext } from '../helpers/walk.ts';

const T = '2026-03-01T12:00:00.500000Z';

interface Walk {
  ids: number[];
  chunks: any[];
}

/** Follows next from a path until it is absent. */
async function follow(app: TestApp, path: string): Promise<Walk> {
  const chunks = await followNext(path, (url) => app.json(url));
  return { chunks, ids: chunks.flatMap((chunk) => chunk.events.map((e: { id: number }) => e.id)) };
}

async function thousandTies(app: TestApp): Promise<number[]> {
  const rows = await app.database.sql`insert into demo.events (type, source, occurred_at)
    select 'login', 'web', ${T}::timestamptz from generate_series(1, 1000) returning id`;
  return rows.map((r) => Number(r.id)).sort((a, b) => a - b);
}

t.test('1,000 events on one timestamp, page size 7: each seen exactly once in both directions', async (t) => {
  const app = await testApp(t);
  const ids = await thousandTies(app);
  t.equal(ids.length, 1000);

  const older = await follow(app, '/v1/events?page-size=7');
  t.same(older.ids, [...ids].reverse(), 'newest first, by id within the timestamp');
  t.equal(older.chunks.length, Math.ceil(1000 / 7));
  t.same(
    older.chunks.flatMap((c) => c.events.map((e: { occurredAt: string }) => e.occurredAt)).filter((at: string) => at !== T),
    [],
    'every item on the one timestamp',
  );

  const newer = await follow(app, '/v1/events?page-size=7&after=2026-03-01T12:00:00.499999Z');
  t.same(newer.ids, ids, 'oldest first, by id within the timestamp');
  const last = newer.chunks.at(-1);
  t.notOk(last._links.next, 'the newest chunk has no next');
  t.ok(last._links.poll, 'but a poll link');

  const before = await follow(app, '/v1/events?page-size=7&before=2026-03-01T12:00:00.500001Z');
  t.same(before.ids, [...ids].reverse());
  t.same((await app.json('/v1/events?before=2026-03-01T12:00:00.500000Z')).body.events, [], 'before is strict');
  t.same((await app.json(`/v1/events?after=${T}`)).body.events, [], 'after is strict');
});

t.test('prev moves the other way without skipping or repeating tied items', async (t) => {
  const app = await testApp(t);
  const ids = await thousandTies(app);
  const older = await follow(app, '/v1/events?page-size=7');
  // From the last older chunk, following prev walks everything back, oldest first.
  const lastOlder = older.chunks.at(-1);
  const back = await follow(app, pathOf(lastOlder._links.prev.href));
  t.same(back.ids, ids.slice(lastOlder.events.length), 'prev of the last chunk, then next: every newer item once');
  // prev of a middle chunk: the items just before it, in the other direction.
  const third = older.chunks[2];
  const prev = await app.json(pathOf(third._links.prev.href));
  t.same(
    prev.body.events.map((e: { id: number }) => e.id),
    [...older.chunks[1].events].reverse().map((e: { id: number }) => e.id),
  );

  const newer = await follow(app, '/v1/events?page-size=7&after=2026-03-01T00:00:00Z');
  const middle = newer.chunks[5];
  const prevOfNewer = await follow(app, pathOf(middle._links.prev.href));
  t.same(prevOfNewer.ids, ids.slice(0, 5 * 7).reverse(), 'prev of a newer chunk walks to the oldest');
  t.type(newer.chunks[0]._links.prev?.href, 'string', 'the oldest chunk has a prev link');
  const beforeOldest = await app.json(pathOf(newer.chunks[0]._links.prev.href));
  t.same(beforeOldest.body.events, [], 'nothing is older than the oldest');
  t.notOk(beforeOldest.body._links.next);
});

t.test('poll: the newest chunk links to where new items will appear; an empty poll keeps its link', async (t) => {
  const app = await testApp(t);
  const ids = await thousandTies(app);
  const newer = await follow(app, '/v1/events?page-size=100&after=2026-03-01T00:00:00Z');
  t.same(newer.ids, ids);
  const poll = pathOf(newer.chunks.at(-1)._links.poll.href);

  const empty = await app.json(poll);
  t.equal(empty.status, 200);
  t.same(empty.body.events, []);
  t.notOk(empty.body._links.next, 'no next on an empty chunk');
  t.equal(pathOf(empty.body._links.poll.href), poll, 'an empty poll keeps its poll link');
  t.match(empty.headers.get('link'), /rel="poll"/);
  // prev of the empty poll chunk still reaches the last item seen (its position is inclusive that way).
  const back = await app.json(pathOf(empty.body._links.prev.href));
  t.same(
    back.body.events.map((e: { id: number }) => e.id),
    ids.slice(-100).reverse(),
    'the link keeps page-size 100',
  );

  // New items: one on the very same timestamp (a larger id), two later; one older, behind the position.
  const added = await app.database.sql`insert into demo.events (type, source, occurred_at) values
    ('login', 'web', ${T}::timestamptz), ('login', 'web', '2026-03-01T12:00:00.500001Z'),
    ('login', 'web', '2026-03-02T00:00:00Z'), ('login', 'web', '2026-03-01T11:00:00Z') returning id`;
  const fresh = await app.json(poll);
  t.same(
    fresh.body.events.map((e: { id: number }) => e.id),
    added.slice(0, 3).map((r) => Number(r.id)),
    'what arrived since, oldest first',
  );
  t.notOk(fresh.body._links.next);
  const again = await app.json(pathOf(fresh.body._links.poll.href));
  t.same(again.body.events, [], 'polling on from there: nothing new');

  const future = await app.json('/v1/events?after=2030-01-01T00:00:00Z');
  t.same(future.body.events, []);
  t.notOk(future.body._links.next);
  t.ok(future.body._links.poll, 'an after chunk that is empty now still links to where new items will appear');
  await app.database.sql`insert into demo.events (type, source, occurred_at) values ('signup', 'api', '2030-01-01T00:00:00.000001Z')`;
  const arrived = await app.json(pathOf(future.body._links.poll.href));
  t.same(
    arrived.body.events.map((e: { occurredAt: string }) => e.occurredAt),
    ['2030-01-01T00:00:00.000001Z'],
  );
});

t.test('microseconds survive end to end', async (t) => {
  const app = await testApp(t);
  const stamps = ['2026-05-05T05:05:05.000001Z', '2026-05-05T05:05:05.000002Z', '2026-05-05T05:05:05.000003Z'];
  for (const s of stamps)
    await app.database.sql`insert into demo.events (type, source, occurred_at) values ('login', 'web', ${s}::timestamptz)`;
  const at = async (path: string) => (await app.json(path)).body.events.map((e: { occurredAt: string }) => e.occurredAt);
  t.same(await at('/v1/events'), [...stamps].reverse());
  t.same(await at(`/v1/events?after=${stamps[0]}`), stamps.slice(1));
  t.same(await at(`/v1/events?before=${stamps[2]}`), [stamps[1], stamps[0]]);
  t.same(await at('/v1/events?after=2026-05-05T07:05:05.000001%2B02:00'), stamps.slice(1), 'an offset other than Z');
  t.same(await at('/v1/events?before=2026-05-04T21:35:05.000002-07:30'), [stamps[0]], 'a negative offset with minutes');
  t.same(await at('/v1/events?after=2026-05-05T05:05:05Z'), stamps, 'no fraction');
  t.same(await at('/v1/events?before=2026-05-05t05:05:05.000002z'), [stamps[0]], 'lower-case t and z');
  // Walking one by one keeps each microsecond apart: no two items a microsecond apart merge or vanish.
  const walk = await follow(app, '/v1/events?page-size=1&after=2026-05-05T05:05:05Z');
  t.equal(walk.ids.length, 3);
  t.same(
    walk.chunks.flatMap((c) => c.events.map((e: { occurredAt: string }) => e.occurredAt)),
    stamps,
  );
});

t.test('before and after: defined answers for every input', async (t) => {
  const app = await testApp(t);
  const bad = [
    'after=2026-05-05T05:05:05.123456789Z', // nine fractional digits
    'before=2026-05-05T05:05:05.1234567Z',
    'after=2026-05-05T05:05:05', // no offset
    'after=2026-05-05 05:05:05Z',
    'after=2026-02-30T00:00:00Z',
    'after=2026-05-05T24:00:00Z',
    'after=2026-05-05T05:05:60Z',
    'after=2026-05-05T05:05:05+24:00',
    'after=2026-05-05T05:05:05+0200',
    'after=2026-05-05T05:05:05.Z',
    'before=yesterday',
    'before=1700000000',
    'before=0000-01-01T00:00:00Z',
    'after=2026-05-05T05:05:05.1+02:00', // "+" unencoded means a space
    'after=%E0%A4%A',
    'after=',
  ];
  for (const query of bad) {
    const { status, body } = await app.json(`/v1/events?${query}`);
    t.equal(status, 400, query);
    t.equal(body.code, 'invalid_parameter', query);
    t.ok(body.invalid_params?.length > 0, query);
  }
  const conflicts = [
    'before=2026-01-01T00:00:00Z&after=2026-01-01T00:00:00Z',
    'before=2026-01-01T00:00:00Z&sort=id',
    'after=2026-01-01T00:00:00Z&count=exact',
    'after=2026-01-01T00:00:00Z&since_id=1',
    'after=2026-01-01T00:00:00Z&limit=5',
    'page-size=5&sort=-occurredAt',
    'page-size=0',
    'page-size=101',
    'after=2026-01-01T00:00:00Z&after=2026-01-02T00:00:00Z',
  ];
  for (const query of conflicts) {
    const { status, body } = await app.json(`/v1/events?${query}`);
    t.equal(status, 400, query);
    t.equal(body.code, 'invalid_parameter', query);
  }
  for (const query of [
    'after=2026-01-01T00:00:00.1Z',
    'before=9999-12-31T23:59:59.999999Z',
    'after=0001-01-01T00:00:00Z',
    'page-size=100',
  ]) {
    t.equal((await app.json(`/v1/events?${query}`)).status, 200, query);
  }
  const products = await app.json('/v1/products?after=2026-01-01T00:00:00Z');
  t.equal(products.status, 400, 'a collection without the time variant');
  t.match(products.body.detail, /does not offer time pagination/);
});

t.test('the first chunk of events is the newest, and its links carry page-size and a cursor', async (t) => {
  const app = await testApp(t);
  // 75 events, four to a second (ties on the timestamp), every third a login: 25 logins, more than the 20 of a chunk.
  await app.database.sql`insert into demo.events (type, source, occurred_at)
    select (array['logout', 'purchase', 'login'])[1 + n % 3], 'web', timestamptz '2026-03-01T00:00:00Z' + (n / 4) * interval '1 second'
    from generate_series(1, 75) n`;
  const logins = (await app.database.sql`select id from demo.events where type = 'login' order by occurred_at desc, id desc`).map((r) =>
    Number(r.id),
  );
  t.equal(logins.length, 25);

  const { body, headers } = await app.json('/v1/events?type=login');
  t.equal(body.pageSize, 20);
  t.same(Object.keys(body), ['pageSize', 'events', '_links']);
  t.equal(body.events.length, 20, 'a full chunk');
  const sorted = [...body.events].sort((a, b) => (a.occurredAt === b.occurredAt ? b.id - a.id : a.occurredAt < b.occurredAt ? 1 : -1));
  t.same(body.events, sorted, 'newest first');
  t.same(
    body.events.map((e: { id: number }) => e.id),
    logins.slice(0, 20),
    'the newest 20 logins',
  );
  t.same(
    body.events.filter((e: { type: string }) => e.type !== 'login'),
    [],
    'logins only',
  );
  t.equal(body._links.self.href, 'http://test.local/v1/events?page-size=20&type=login');
  t.match(body._links.prev.href, /^http:\/\/test\.local\/v1\/events\?page-size=20&cursor=v1\.[\w-]+\.[\w-]+$/);
  t.match(headers.get('link'), /rel="self"/);
  // The filter travels in the cursor: following the link alone keeps it.
  t.match(
    body._links.next?.href,
    /^http:\/\/test\.local\/v1\/events\?page-size=20&cursor=v1\.[\w-]+\.[\w-]+$/,
    'a next link, without the filter',
  );
  const next = await app.json(pathOf(body._links.next.href));
  t.equal(next.status, 200);
  t.same(
    next.body.events.map((e: { id: number; type: string }) => [e.id, e.type]),
    logins.slice(20).map((id) => [id, 'login']),
    'the other 5 logins, and nothing else',
  );
});
