// Housekeeping: the rows of quiet subjects go away, removed by whichever instance takes the lock.
import type { Sql } from 'postgres';
import t from 'tap';
import { housekeep } from '../../lib/ratelimit/housekeeping.ts';
import { databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { testApp } from '../helpers/app.ts';
import { scratchSession } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

async function rows(sql: Sql): Promise<number> {
  const [row] = await sql`select count(*)::int as n from paginated_collections.rate_windows`;
  return row!.n;
}

t.test('only the rows of subjects quiet for a minute are removed', async (t) => {
  const api = await testApp(t, { rateLimit: true }); // leases of 30 s
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 10, concurrency: 4 });
  for (let i = 0; i < 20; i++) await api.request('/v1', { address: `198.51.100.${i}` });
  await api.request('/v1/keys', { method: 'POST' }); // a registration counter, one hour long
  // A lease of 5 s left behind by an instance that died; its unit counts for 11 s.
  await databaseLimiter(api.database.sql, 5).decide({
    keyHash: undefined,
    ipSubject: 'ip:203.0.113.1',
    ipTier: 'anonymous',
    cost: 1,
    clockOffset: 0,
  });
  t.equal(await rows(api.database.sql), 22, 'one row per client');

  t.equal(await housekeep(api.database.sql, 0), 0, 'nothing is quiet yet');
  t.equal(await housekeep(api.database.sql, 65), 0, 'quiet, but not yet for a minute');
  t.equal(await housekeep(api.database.sql, 75), 1, 'the lease left behind and its unit stopped counting 11 s in');
  t.equal(await housekeep(api.database.sql, 95), 20, 'leases of the served requests counted until 30 s in');
  t.equal(await rows(api.database.sql), 1, 'the registration counter still counts');
  const res = await api.request('/v1/keys', { method: 'POST' });
  t.equal(res.headers.get('x-ratelimit-remaining'), '3', 'and it was kept');
  t.equal(await housekeep(api.database.sql, 3800), 1, 'the registration row, an hour and a minute later');
});

t.test('a row that a batch holds is skipped, not waited for', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await api.request('/v1', { address: '198.51.100.1' });
  await api.request('/v1', { address: '198.51.100.2' });
  const other = scratchSession(t, api.database.url);
  await other.begin(async (tx) => {
    await tx`select 1 from paginated_collections.rate_windows where subject = 'ip:198.51.100.1' for no key update`;
    t.equal(await housekeep(api.database.sql, 200), 1, 'the other row goes at once');
  });
  t.equal(await housekeep(api.database.sql, 200), 1, 'the held one goes the next time');
});

t.test('one instance at a time: the others skip while the lock is held', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const other = scratchSession(t, api.database.url);
  await other.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(7204119003)`;
    t.equal(await housekeep(api.database.sql), -1);
  });
  t.equal(await housekeep(api.database.sql), 0);
});

t.test('requests trigger housekeeping now and then, without a separate process', async (t) => {
  const api = await testApp(t, { rateLimit: { housekeepingMs: 50 } });
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 2, concurrency: 4 });
  for (let i = 0; i < 10; i++) await api.request('/v1', { address: `198.51.100.${i}` });
  t.equal(await rows(api.database.sql), 10);
  api.clock = 100; // past every lease (30 s) and a minute
  await sleep(60);
  await api.request('/v1', { address: '192.0.2.200' });
  const left = await waitFor('housekeeping to remove the old rows', () => rows(api.database.sql), {
    until: (n) => n <= 1,
    timeoutMs: 1_000,
    intervalMs: 20,
  });
  t.equal(left, 1, 'only the newest row is left');
});
