// Conditional requests over a listening server: chunks carry an ETag; If-None-Match with it is a 304 that costs nothing.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { chargedUnits, limits } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';

t.test('a chunk carries a weak ETag and Cache-Control: private, no-cache; If-None-Match with it is a free 304', async (t) => {
  const api = await testApp(t, { seed: { products: 30 }, rateLimit: true });
  const origin = await listening(t, api.app);
  const path = `${origin}/v1/products?limit=10`; // 10 items and an exact count: 2 units
  const first = await fetch(path);
  t.equal(first.status, 200);
  const etag = first.headers.get('etag')!;
  t.match(etag, /^W\/"[A-Za-z0-9_-]{27}"$/);
  t.equal(first.headers.get('cache-control'), 'private, no-cache');
  t.equal(limits(first).remaining, 58);
  t.equal((await fetch(path)).headers.get('etag'), etag, 'the same chunk, the same tag');

  const before = await chargedUnits(api.database.sql);
  t.equal(before, 4);
  for (const header of [etag, etag.slice(2), `"other", ${etag}`, '*']) {
    const res = await fetch(path, { headers: { 'if-none-match': header } });
    t.equal(res.status, 304, header);
    t.equal(await res.text(), '', `${header}: no body`);
    t.equal(res.headers.get('etag'), etag, header);
    t.equal(res.headers.get('cache-control'), 'private, no-cache', header);
    t.equal(res.headers.get('content-type'), null, header);
    t.equal(limits(res).remaining, 56, `${header}: the allowance as it was, with the 304's units back`);
    t.equal(limits(res).limit, 60, header);
    t.match(res.headers.get('ratelimit'), /;r=56;/, header);
    t.equal(res.headers.get('link'), null, `${header}: no links of a body it does not send`);
    t.match(res.headers.get('x-request-id'), /^[0-9a-f-]{36}$/, `${header}: its own request id`);
    t.equal(res.headers.get('access-control-allow-origin'), '*', `${header}: readable by a page`);
  }
  t.equal(await chargedUnits(api.database.sql), before, 'the four 304s cost nothing');

  const miss = await fetch(path, { headers: { 'if-none-match': 'W/"not-this-one"' } });
  t.equal(miss.status, 200, 'another tag: the chunk, charged');
  t.equal(limits(miss).remaining, 54);

  const head = await fetch(path, { method: 'HEAD', headers: { 'if-none-match': etag } });
  t.equal(head.status, 304, 'HEAD too');
  t.equal(limits(head).remaining, 54);

  await api.database.sql`update products set name = 'Renamed' where id = 3`;
  const changed = await fetch(path, { headers: { 'if-none-match': etag } });
  t.equal(changed.status, 200, 'a changed item changes the tag');
  t.not(changed.headers.get('etag'), etag);
  t.equal(limits(changed).remaining, 52, 'and the chunk is charged');
  t.equal(await chargedUnits(api.database.sql), 8);
});

t.test('polling an unchanged time chunk through its poll link is a free 304, until an event arrives', async (t) => {
  const api = await testApp(t, { seed: { events: 12 }, rateLimit: true });
  const origin = await listening(t, api.app);
  const get = (href: string, headers: Record<string, string> = {}) => fetch(href, { headers });
  const newest = await (await get(`${origin}/v1/events?page-size=5`)).json();
  const towardsNewer = await (await get(newest._links.prev.href)).json();
  t.same(towardsNewer.events, [], 'nothing newer than the newest');
  const poll = towardsNewer._links.poll.href as string;
  t.ok(poll, 'a poll link');
  const polled = await get(poll);
  t.equal(polled.status, 200);
  const etag = polled.headers.get('etag')!;
  const charged = await chargedUnits(api.database.sql);
  let remaining = limits(polled).remaining;
  for (let i = 0; i < 5; i++) {
    const res = await get(poll, { 'if-none-match': etag });
    t.equal(res.status, 304, `poll ${i + 1}`);
    t.equal(limits(res).remaining, remaining, `poll ${i + 1}: the allowance does not move`);
    remaining = limits(res).remaining;
  }
  t.equal(await chargedUnits(api.database.sql), charged, 'five polls, nothing charged');

  await api.database.sql`insert into events (type, source, occurred_at, message) values ('login', 'web', '2100-01-01T00:00:00Z', 'new')`;
  const arrived = await get(poll, { 'if-none-match': etag });
  t.equal(arrived.status, 200, 'the new event');
  t.equal((await arrived.json()).events[0].message, 'new');
  t.equal(limits(arrived).remaining, remaining - 1, 'charged like any chunk');
});
