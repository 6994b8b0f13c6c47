// Housekeeping: expired counters and leases go away, run by whichever instance takes the lock.
import postgres from 'postgres';
import t from 'tap';
import { housekeep } from '../lib/limiter.ts';
import { limitedApp } from './helpers/limiter.ts';

async function rows(sql: postgres.Sql): Promise<{ counters: number; slots: number }> {
  const [row] = await sql`
    select (select count(*)::int from rate_counters) as counters, (select count(*)::int from rate_slots) as slots`;
  return { counters: row!.counters, slots: row!.slots };
}

t.test('only counters that no longer count and slots free for a minute are removed', async (t) => {
  const api = await limitedApp(t);
  await api.setTier('anonymous', 100, 10, 4);
  for (let i = 0; i < 20; i++) await api.request('/v1', { address: `198.51.100.${i}` });
  await api.request('/v1/keys', { method: 'POST' }); // a registration counter, one hour long
  await api.db.sql`select * from rate_decide(null, 'ip:203.0.113.1', 'anonymous', 1, 5, 0)`; // a lease left behind
  // One slot per client: 21 freed when their requests ended, one still held.
  t.same(await rows(api.db.sql), { counters: 22, slots: 22 });

  t.equal(await housekeep(api.db.sql, 0), 0, 'nothing has expired yet; free slots are kept for reuse');
  t.equal(await housekeep(api.db.sql, 12), 21, 'anonymous counters expire after bucket + window');
  t.same(await rows(api.db.sql), { counters: 1, slots: 22 }, 'the registration counter still counts');
  t.equal(await housekeep(api.db.sql, 62), 21, 'slots free for a minute go');
  t.equal(await housekeep(api.db.sql, 66), 1, 'the lease left behind goes a minute after its TTL');
  t.same(await rows(api.db.sql), { counters: 1, slots: 0 });
  const res = await api.request('/v1/keys', { method: 'POST' });
  t.equal(res.headers.get('x-ratelimit-remaining'), '3', 'and it was kept');
  t.equal(await housekeep(api.db.sql, 3700), 2, 'the registration counter and its free slot');
});

t.test('one instance at a time: the others skip while the lock is held', async (t) => {
  const api = await limitedApp(t);
  const other = postgres(api.db.url, { max: 1, onnotice: () => {} });
  t.teardown(() => other.end({ timeout: 1 }));
  await other.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(7204119003)`;
    t.equal(await housekeep(api.db.sql), -1);
  });
  t.equal(await housekeep(api.db.sql), 0);
});

t.test('requests trigger housekeeping now and then, without a separate process', async (t) => {
  const api = await limitedApp(t, { limiter: { housekeepingMs: 50 } });
  await api.setTier('anonymous', 100, 2, 4);
  for (let i = 0; i < 10; i++) await api.request('/v1', { address: `198.51.100.${i}` });
  t.equal((await rows(api.db.sql)).counters, 10);
  api.clock = 10;
  await new Promise((resolve) => setTimeout(resolve, 60));
  await api.request('/v1', { address: '192.0.2.200' });
  let left = 11;
  for (let i = 0; i < 50 && left > 1; i++) {
    left = (await rows(api.db.sql)).counters;
    if (left > 1) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.equal(left, 1, 'only the newest counter is left');
});
