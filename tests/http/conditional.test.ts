// Conditional requests over a listening server: chunks carry a keyed ETag; If-None-Match with it is a 304 that gives back the units of sending.
import { createHash } from 'node:crypto';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { chargedUnits, limits } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';

t.test(
  'a chunk carries a weak ETag and Cache-Control: private, no-cache; If-None-Match with it is a 304 that gives back the sending units',
  async (t) => {
    const api = await testApp(t, { seed: { products: 30 }, rateLimit: true });
    const origin = await listening(t, api.app);
    const path = `${origin}/v1/products?limit=10`; // 10 items (1 unit); a count of 30 rows reads under a unit's worth
    const first = await fetch(path);
    t.equal(first.status, 200);
    const etag = first.headers.get('etag')!;
    t.match(etag, /^W\/"[A-Za-z0-9_-]{27}"$/);
    t.equal(first.headers.get('cache-control'), 'private, no-cache');
    t.equal(limits(first).remaining, 59);
    t.equal((await fetch(path)).headers.get('etag'), etag, 'the same chunk, the same tag');

    const before = await chargedUnits(api.database.sql);
    t.equal(before, 2);
    for (const header of [etag, etag.slice(2), `"other", ${etag}`]) {
      const res = await fetch(path, { headers: { 'if-none-match': header } });
      t.equal(res.status, 304, header);
      t.equal(await res.text(), '', `${header}: no body`);
      t.equal(res.headers.get('etag'), etag, header);
      t.equal(res.headers.get('cache-control'), 'private, no-cache', header);
      t.equal(res.headers.get('content-type'), null, header);
      t.equal(limits(res).remaining, 58, `${header}: the allowance as it was, with the sending unit back`);
      t.equal(limits(res).limit, 60, header);
      t.match(res.headers.get('ratelimit'), /;r=58;/, header);
      t.equal(res.headers.get('link'), null, `${header}: no links of a body it does not send`);
      t.match(res.headers.get('x-request-id'), /^[0-9a-f-]{36}$/, `${header}: its own request id`);
      t.equal(res.headers.get('access-control-allow-origin'), '*', `${header}: readable by a page`);
    }
    t.equal(await chargedUnits(api.database.sql), before, 'three 304s of a cheap chunk cost nothing');

    const star = await fetch(path, { headers: { 'if-none-match': '*' } });
    t.equal(star.status, 304, '* matches the current chunk');
    t.equal(limits(star).remaining, 57, '* gives nothing back');

    const miss = await fetch(path, { headers: { 'if-none-match': 'W/"not-this-one"' } });
    t.equal(miss.status, 200, 'another tag: the chunk, charged');
    t.equal(limits(miss).remaining, 56);

    const head = await fetch(path, { method: 'HEAD', headers: { 'if-none-match': etag } });
    t.equal(head.status, 304, 'HEAD too');
    t.equal(limits(head).remaining, 56);

    await api.database.sql`update demo.products set name = 'Renamed' where id = 3`;
    const changed = await fetch(path, { headers: { 'if-none-match': etag } });
    t.equal(changed.status, 200, 'a changed item changes the tag');
    t.not(changed.headers.get('etag'), etag);
    t.equal(limits(changed).remaining, 55, 'and the chunk is charged');
    t.equal(await chargedUnits(api.database.sql), 5);
  },
);

t.test('a cheap chunk polled with its tag is free; an expensive one is charged its read cost, and * all of it', async (t) => {
  const api = await testApp(t, { seed: { products: 30 }, rateLimit: true });
  const origin = await listening(t, api.app);
  const cheap = `${origin}/v1/products?limit=10&count=none`; // 1 unit, all of it for sending
  const tag = (await fetch(cheap)).headers.get('etag')!;
  const charged = await chargedUnits(api.database.sql);
  for (let i = 0; i < 5; i++) t.equal((await fetch(cheap, { headers: { 'if-none-match': tag } })).status, 304);
  t.equal(await chargedUnits(api.database.sql), charged, 'five polls of a cheap chunk: nothing charged');

  // An offset of 10,000 along the name index: 1 unit for sending, 10 for the rows skipped (docs/reference/costs.md).
  const deep = `${origin}/v1/products?limit=10&count=none&sort=name&offset=10000`;
  const first = await fetch(deep);
  t.equal(limits(first).remaining, 60 - 1 - 11);
  const deepTag = first.headers.get('etag')!;
  const polled = await fetch(deep, { headers: { 'if-none-match': deepTag } });
  t.equal(polled.status, 304);
  t.equal(limits(polled).remaining, 60 - 1 - 11 - 10, 'its own tag: the 10 units of the rows skipped stay charged');
  const star = await fetch(deep, { headers: { 'if-none-match': '*' } });
  t.equal(star.status, 304, '* is a 304 too');
  t.equal(limits(star).remaining, 60 - 1 - 11 - 10 - 11, 'and is charged in full');
  t.equal(await chargedUnits(api.database.sql), 1 + 11 + 10 + 11);
});

t.test('the ETag is keyed with the cursor secret: no client can compute it, every instance sharing the secret agrees', async (t) => {
  const secret = 'etag-secret-for-tests-0123456789abcdef';
  const one = await testApp(t, { seed: { products: 5 }, env: { CURSOR_SECRET: secret } });
  const other = await testApp(t, { seed: { products: 5 }, env: { CURSOR_SECRET: `${secret}-other` } });
  const path = '/v1/products?limit=5&count=none&name=nothing-has-this-name';
  const answer = await one.request(path);
  const body = await answer.text();
  const etag = answer.headers.get('etag')!;
  t.not(etag, `W/"${createHash('sha1').update(body).digest('base64url')}"`, 'not a plain digest of the body');
  t.not(etag, `W/"${createHash('sha256').update(body).digest().toString('base64url', 0, 20)}"`, 'nor a truncated one');
  const again = await testApp(t, { seed: { products: 5 }, env: { CURSOR_SECRET: secret } });
  t.equal((await again.request(path)).headers.get('etag'), etag, 'another instance with the same secret: the same tag');
  const otherAnswer = await other.request(path);
  t.equal(await otherAnswer.text(), body, 'the same body under another secret');
  t.not(otherAnswer.headers.get('etag'), etag, 'has another tag');
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

  await api.database
    .sql`insert into demo.events (type, source, occurred_at, message) values ('login', 'web', '2100-01-01T00:00:00Z', 'new')`;
  const arrived = await get(poll, { 'if-none-match': etag });
  t.equal(arrived.status, 200, 'the new event');
  t.equal((await arrived.json()).events[0].message, 'new');
  t.equal(limits(arrived).remaining, remaining - 1, 'charged like any chunk');
});
