// The concurrency cap: in-flight requests per client, exact; leases left behind expire by themselves.
import postgres from 'postgres';
import t from 'tap';
import { groupReleaser } from '../lib/limiter.ts';
import { limitedApp, limits } from './helpers/limiter.ts';

t.test('over the cap: 429 Concurrency_limit_exceeded, nothing charged; leases released after', async (t) => {
  const api = await limitedApp(t);
  await api.setTier('anonymous', 100, 60, 2);
  // Hold the products table so that admitted requests stay in flight.
  const locker = postgres(api.db.url, { max: 1, onnotice: () => {} });
  t.teardown(() => locker.end({ timeout: 1 }));
  const reserved = await locker.reserve();
  await reserved`begin`;
  await reserved`lock table products in access exclusive mode`;

  const inFlight = [1, 2].map(() => api.request('/v1/products?count=none'));
  // Wait until both hold a lease (they are then blocked on the lock).
  for (let i = 0; i < 100; i++) {
    const [row] = await api.db.sql`select count(*)::int as n from rate_slots where expires_at > extract(epoch from clock_timestamp())`;
    if (row!.n === 2) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const declined = await Promise.all([1, 2, 3].map(() => api.request('/v1/products?count=none')));
  for (const res of declined) {
    t.equal(res.status, 429);
    t.equal((await res.json()).code, 'Concurrency_limit_exceeded');
    t.equal(res.headers.get('retry-after'), '1');
    t.equal(limits(res).remaining, 98, 'declined requests are not charged');
  }
  t.equal((await api.request('/v1', { address: '192.0.2.77' })).status, 200, 'another client is not capped');

  await reserved`commit`;
  reserved.release();
  const served = await Promise.all(inFlight);
  t.same(served.map((res) => res.status), [200, 200]);
  const [row] = await api.db.sql`select count(*)::int as n from rate_slots where expires_at > extract(epoch from clock_timestamp())`;
  t.equal(row!.n, 0, 'every lease was released');
  t.equal((await api.request('/v1/products?count=none')).status, 200, 'the cap is free again');
});

t.test('a lease that a dead instance left behind expires by itself', async (t) => {
  const api = await limitedApp(t, { limiter: { leaseTtlSeconds: 30 } });
  await api.setTier('anonymous', 100, 60, 1);
  // An instance took a lease and died before releasing it.
  await api.db.sql`select * from rate_decide(null, 'ip:192.0.2.1', 'anonymous', 1, 30, 0)`;
  const blocked = await api.request('/v1');
  t.equal(blocked.status, 429);
  t.equal((await blocked.json()).code, 'Concurrency_limit_exceeded');
  api.clock = 29;
  t.equal((await api.request('/v1')).status, 429, 'still counted before its TTL');
  api.clock = 31;
  t.equal((await api.request('/v1')).status, 200, 'expired after its TTL');
});

t.test('a cap change applies at the next request', async (t) => {
  const api = await limitedApp(t);
  await api.setTier('anonymous', 100, 60, 1);
  await api.db.sql`select * from rate_decide(null, 'ip:192.0.2.1', 'anonymous', 1, 30, 0)`;
  t.equal((await api.request('/v1')).status, 429);
  await api.setTier('anonymous', 100, 60, 2);
  t.equal((await api.request('/v1')).status, 200);
});

t.test('a late release never frees a slot that another request took after the lease expired', async (t) => {
  const api = await limitedApp(t);
  await api.setTier('anonymous', 100, 60, 1);
  const take = async (offset: number) => {
    const [row] = await api.db.sql`select * from rate_decide(null, 'ip:192.0.2.1', 'anonymous', 1, 30, ${offset})`;
    t.equal(row!.outcome, 'ok');
    return { slot: row!.lease_slot as number, token: String(row!.lease_token) };
  };
  const release = groupReleaser(api.db.sql); // the release the middleware uses
  const first = await take(0);
  const second = await take(31); // the first lease has expired: its slot is taken again
  t.equal(second.slot, first.slot);
  await release('ip:192.0.2.1', first); // the first request ends late
  api.clock = 31;
  t.equal((await api.request('/v1')).status, 429, 'the second lease still holds the slot');
  await release('ip:192.0.2.1', second);
  t.equal((await api.request('/v1')).status, 200);
});

t.test('leases that end together are released together, each caller waiting for its own', async (t) => {
  const api = await limitedApp(t);
  const leases = [];
  for (let i = 0; i < 20; i++) {
    const [row] = await api.db.sql`select * from rate_decide(null, ${`ip:198.51.100.${i}`}, 'anonymous', 1, 30, 0)`;
    leases.push({ subject: row!.subject as string, lease: { slot: row!.lease_slot as number, token: String(row!.lease_token) } });
  }
  let statements = 0;
  const counted = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    statements++;
    return (api.db.sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => unknown)(strings, ...values);
  }) as unknown as typeof api.db.sql;
  const release = groupReleaser(counted);
  await Promise.all(leases.map(({ subject, lease }) => release(subject, lease)));
  t.ok(statements <= 2, `20 releases in ${statements} statements`);
  const [row] = await api.db.sql`select count(*)::int as n from rate_slots where expires_at > extract(epoch from clock_timestamp())`;
  t.equal(row!.n, 0, 'every lease was released');
});
