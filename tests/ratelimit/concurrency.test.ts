// The concurrency cap: in-flight requests per client, exact; leases left behind expire by themselves.
import type postgres from 'postgres';
import t from 'tap';
import { type Decision, databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { testApp } from '../helpers/app.ts';
import { holdLock, lockWaiters } from '../helpers/db.ts';
import { chargedUnits, limits, liveLeases, setTier } from '../helpers/limiter.ts';
import { holdEventLoop, waitFor } from '../helpers/wait.ts';

/** An anonymous decision for `address`, as the middleware asks for it. */
const anonymous = (address: string, clockOffset = 0) => ({
  keyHash: undefined,
  ipSubject: `ip:${address}`,
  ipTier: 'anonymous',
  cost: 1,
  clockOffset,
});

/** Holds the row of `subject` locked, so that a statement deciding for it stays in flight. */
const lockRow = (t: { teardown(fn: () => unknown): void }, url: string, subject: string) =>
  holdLock(t, url, async (sql) => {
    const [row] = await sql`select subject from paginated_collections.rate_windows where subject = ${subject} for update`;
    if (row === undefined) throw new Error(`${subject} has no row to lock`);
  });

t.test('over the cap: 429 Concurrency_limit_exceeded, nothing charged; leases released after', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  // An allowance whose budget of PostgreSQL time (lib/ratelimit/budget.ts) outlasts the lock below however
  // busy the machine: with a small one, the two requests held behind it are cut short (a 429) when it is busy.
  await setTier(api.database.sql, 'anonymous', { allowance: 100_000, windowSeconds: 60, concurrency: 2 });
  // Hold the products table so that admitted requests stay in flight.
  const products = await holdLock(t, api.database.url, (sql) => sql`lock table demo.products in access exclusive mode`);

  const inFlight = [1, 2].map(() => api.request('/v1/products?count=none'));
  // Wait until both hold a lease (they are then blocked on the lock).
  await waitFor('two leases', () => liveLeases(api.database.sql), { until: (n) => n >= 2, timeoutMs: 2_000, intervalMs: 20 });
  const declined = await Promise.all([1, 2, 3].map(() => api.request('/v1/products?count=none')));
  for (const res of declined) {
    t.equal(res.status, 429);
    t.equal((await res.json()).code, 'Concurrency_limit_exceeded');
    t.equal(res.headers.get('retry-after'), '1');
    t.equal(limits(res).remaining, 99_998, 'declined requests are not charged');
  }
  t.equal((await api.request('/v1', { address: '192.0.2.77' })).status, 200, 'another client is not capped');

  await products.unlock();
  const served = await Promise.all(inFlight);
  t.same(
    served.map((res) => res.status),
    [200, 200],
  );
  t.equal(await liveLeases(api.database.sql), 0, 'every lease was released');
  t.equal((await api.request('/v1/products?count=none')).status, 200, 'the cap is free again');
});

t.test('with every pool connection busy on slow data queries, the limiter still answers and declines', async (t) => {
  const api = await testApp(t, { rateLimit: true }); // the test pool has 4 connections
  await setTier(api.database.sql, 'anonymous', { allowance: 6, windowSeconds: 60, concurrency: 20 });
  const products = await holdLock(t, api.database.url, (sql) => sql`lock table demo.products in access exclusive mode`);

  // Six admitted requests: four block on the lock, holding every pool connection; two queue for one. Six
  // chunks (requests for the same chunk at the same time share one statement), each of cost 1.
  const admitted = Array.from({ length: 6 }, (_, i) => api.request(`/v1/products?count=none&limit=${20 - i}`));
  // Watched from the connection that holds the lock: the pool has none to spare.
  await waitFor('six leases', () => liveLeases(products.sql), { until: (n) => n >= 6, timeoutMs: 2_000, intervalMs: 20 });
  t.equal(await liveLeases(products.sql), 6);
  const declined = await api.request('/v1/products?count=none');
  t.equal(declined.status, 429, 'declined by the limiter, not a 503 from waiting for the pool');
  t.equal((await declined.json()).code, 'Request_limit_exceeded');

  await products.unlock();
  t.same(
    (await Promise.all(admitted)).map((res) => res.status),
    [200, 200, 200, 200, 200, 200],
  );
});

t.test('a lease that a dead instance left behind expires by itself', async (t) => {
  const api = await testApp(t, { rateLimit: { leaseTtlSeconds: 30 } });
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 1 });
  // An instance took a lease and died before releasing it.
  t.equal((await databaseLimiter(api.database.sql, 30).decide(anonymous('192.0.2.1'))).outcome, 'ok');
  const blocked = await api.request('/v1');
  t.equal(blocked.status, 429);
  t.equal((await blocked.json()).code, 'Concurrency_limit_exceeded');
  api.clock = 29;
  t.equal((await api.request('/v1')).status, 429, 'still counted before its TTL');
  api.clock = 31;
  t.equal((await api.request('/v1')).status, 200, 'expired after its TTL');
});

t.test('a cap change applies at the next request', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 1 });
  await databaseLimiter(api.database.sql, 30).decide(anonymous('192.0.2.1'));
  t.equal((await api.request('/v1')).status, 429);
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 2 });
  t.equal((await api.request('/v1')).status, 200);
});

t.test('a late release never frees a slot that another request took after the lease expired', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 1 });
  const limiter = databaseLimiter(api.database.sql, 30); // the client the middleware uses
  const take = async (offset: number) => {
    const decision = await limiter.decide(anonymous('192.0.2.1', offset));
    t.equal(decision.outcome, 'ok');
    return decision.lease!;
  };
  const first = await take(0);
  const second = await take(31); // the first lease has expired: its slot is taken again
  t.equal(second.slot, first.slot);
  await limiter.release('ip:192.0.2.1', first); // the first request ends late
  api.clock = 31;
  t.equal((await api.request('/v1')).status, 429, 'the second lease still holds the slot');
  await limiter.release('ip:192.0.2.1', second);
  t.equal((await api.request('/v1')).status, 200);
});

/**
 * A postgres.js client that counts the statements sent through it: its calls as a tag of a template, not those
 * naming an identifier (sql(SERVICE_SCHEMA), which sends nothing).
 */
function counting(sql: postgres.Sql): { sql: postgres.Sql; statements: () => number } {
  let statements = 0;
  const counted = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    if (Array.isArray(strings) && 'raw' in strings) statements++;
    return (sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => unknown)(strings, ...values);
  }) as unknown as postgres.Sql;
  return { sql: counted, statements: () => statements };
}

t.test('decisions and releases asked for together share one statement, each caller getting its own answer', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const setup = databaseLimiter(api.database.sql, 30);
  const held = await Promise.all(Array.from({ length: 10 }, (_, i) => setup.decide(anonymous(`198.51.100.${i}`))));
  t.equal(await liveLeases(api.database.sql), 10);

  const { sql, statements } = counting(api.database.sql);
  const limiter = databaseLimiter(sql, 30);
  // Ten requests end while twenty others (two per client of 198.51.100.0/24 and ten new ones) begin.
  const [decisions] = await Promise.all([
    Promise.all(Array.from({ length: 20 }, (_, i) => limiter.decide(anonymous(`198.51.100.${i}`)))),
    Promise.all(held.map((decision) => limiter.release(decision.subject, decision.lease!))),
  ]);
  t.equal(statements(), 1, 'one statement for 20 decisions and 10 releases');
  t.same(
    decisions.map((decision: Decision) => [decision.subject, decision.outcome, decision.remaining]),
    Array.from({ length: 20 }, (_, i) => [`ip:198.51.100.${i}`, 'ok', i < 10 ? 58 : 59]),
    'every caller gets the decision for its own client',
  );
  t.equal(await liveLeases(api.database.sql), 20, 'the ten old leases were released, the twenty new ones are held');

  const { sql: alone, statements: releaseStatements } = counting(api.database.sql);
  const releaser = databaseLimiter(alone, 30);
  await Promise.all(decisions.map((decision: Decision) => releaser.release(decision.subject, decision.lease!)));
  t.equal(releaseStatements(), 1, '20 releases with no decision to ride with: one statement');
  t.equal(await liveLeases(api.database.sql), 0, 'every lease was released');
});

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

t.test('two statements in flight at most: what is asked for meanwhile goes as the next statement, together', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const { sql, statements } = counting(api.database.sql);
  const limiter = databaseLimiter(sql, 30);
  const lease = (await limiter.decide(anonymous('192.0.2.1'))).lease!; // the client's row now exists
  const row = await lockRow(t, api.database.url, 'ip:192.0.2.1');
  const first = limiter.decide(anonymous('192.0.2.1'));
  await nextTurn();
  const second = limiter.decide(anonymous('192.0.2.1'));
  await lockWaiters(api.database.sql, api.database.name, 1, 5_000);
  await nextTurn();
  t.equal(statements(), 3, 'the second decision went out while the first waits');
  // Five decisions and a release, each asked for in a turn of the event loop of its own.
  const later: Promise<unknown>[] = [];
  for (let i = 0; i < 5; i++) {
    later.push(limiter.decide(anonymous(`192.0.2.${10 + i}`)));
    await nextTurn();
  }
  later.push(limiter.release('ip:192.0.2.1', lease));
  await nextTurn();
  t.equal(statements(), 3, 'nothing more is sent while two statements are in flight');
  await row.unlock();
  t.same([(await first).outcome, (await second).outcome], ['ok', 'ok']);
  const results = await Promise.all(later);
  t.equal(statements(), 4, 'then the five decisions and the release go as one statement');
  t.same(
    results.slice(0, 5).map((decision) => (decision as Decision).outcome),
    ['ok', 'ok', 'ok', 'ok', 'ok'],
  );
  t.equal(await liveLeases(api.database.sql, 'ip:192.0.2.1'), 2, 'the released lease is free, the two taken after it held');
});

t.test('releases alone wait for the statement in flight: a decision asked for meanwhile carries them', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const { sql, statements } = counting(api.database.sql);
  const limiter = databaseLimiter(sql, 30);
  const leases = [(await limiter.decide(anonymous('192.0.2.1'))).lease!, (await limiter.decide(anonymous('192.0.2.1'))).lease!];
  t.equal(statements(), 2);
  /** A decision of the client held in flight on its locked row, and the release of `lease` asked for behind it. */
  const releaseBehindDecision = async (lease: NonNullable<Decision['lease']>) => {
    const row = await lockRow(t, api.database.url, 'ip:192.0.2.1');
    const decided = limiter.decide(anonymous('192.0.2.1'));
    await lockWaiters(api.database.sql, api.database.name, 1, 5_000);
    const released = limiter.release('ip:192.0.2.1', lease);
    await nextTurn();
    await nextTurn();
    return { row, decided, released };
  };

  const first = await releaseBehindDecision(leases[0]!);
  t.equal(statements(), 3, 'the release is not sent alone while a statement is in flight');
  const second = limiter.decide(anonymous('192.0.2.2'));
  await nextTurn();
  t.equal(statements(), 4, 'a decision goes out as the second statement in flight, the release with it');
  await first.row.unlock();
  t.same([(await first.decided).outcome, (await second).outcome], ['ok', 'ok']);
  await first.released;
  t.equal(statements(), 4, 'no statement more for the release');
  t.equal(await liveLeases(api.database.sql, 'ip:192.0.2.1'), 2, 'the released lease is free; the other and the new one held');

  const third = await releaseBehindDecision(leases[1]!);
  t.equal(statements(), 5, 'no decision comes: the release still waits');
  await third.row.unlock();
  await Promise.all([third.decided, third.released]);
  t.equal(statements(), 6, 'it goes alone once the statement in flight has answered');
  t.equal(await liveLeases(api.database.sql, 'ip:192.0.2.1'), 2, 'the second lease is free too; the two taken since are held');
});

t.test('a decision whose caller stopped waiting is never sent: nothing charged, no lease', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const limiter = databaseLimiter(api.database.sql, 30);
  await limiter.decide(anonymous('192.0.2.1'));
  const row = await lockRow(t, api.database.url, 'ip:192.0.2.1');
  // Two statements wait on the lock, so the next decisions wait to be sent.
  const first = limiter.decide(anonymous('192.0.2.1'));
  await nextTurn();
  const second = limiter.decide(anonymous('192.0.2.1'));
  await lockWaiters(api.database.sql, api.database.name, 1, 5_000);
  const gaveUp = new AbortController();
  const late = t.rejects(limiter.decide(anonymous('192.0.2.99'), gaveUp.signal), /stopped waiting/);
  const onTime = limiter.decide(anonymous('192.0.2.98'), new AbortController().signal);
  await nextTurn();
  gaveUp.abort(new Error('stopped waiting'));
  await row.unlock();
  await Promise.all([first, second, late]);
  t.equal((await onTime).outcome, 'ok', 'a decision still awaited is sent');
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.99'), 0);
  t.equal(await liveLeases(api.database.sql, 'ip:192.0.2.99'), 0);
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.98'), 1);
});

t.test('a request answered 503 while its decision waited to be sent is never charged', async (t) => {
  const api = await testApp(t, { rateLimit: { timeoutMs: 200 } });
  t.equal((await api.request('/v1')).status, 200); // the row of 192.0.2.1 now exists
  const row = await lockRow(t, api.database.url, 'ip:192.0.2.1');
  const stuck = api.request('/v1'); // its statement waits on the lock
  await lockWaiters(api.database.sql, api.database.name, 1, 5_000);
  const behind = api.request('/v1', { address: '192.0.2.2' }); // sent, and waits behind it on the connection
  await nextTurn();
  await nextTurn();
  const queued = await api.request('/v1', { address: '192.0.2.3' }); // waits for one of the two to answer
  t.equal(queued.status, 503);
  t.equal((await behind).status, 503);
  t.equal((await stuck).status, 503);
  await row.unlock();
  await waitFor('a unit charged to 192.0.2.2', () => chargedUnits(api.database.sql, 'ip:192.0.2.2'), {
    until: (n) => n >= 1,
    timeoutMs: 2_000,
    intervalMs: 20,
  });
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.1'), 2, 'the decisions already sent were made');
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.2'), 1);
  t.equal((await api.request('/v1', { address: '192.0.2.4' })).status, 200, 'the limiter goes on');
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.3'), 0, 'the one not yet sent never was');
});

t.test('batches from many instances lock in one order: no deadlock, nothing lost', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  await setTier(api.database.sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 60, concurrency: 1000 });
  // Eight instances, each deciding and releasing for the same 30 clients in a different order, at once.
  const instances = Array.from({ length: 8 }, () => databaseLimiter(api.database.sql, 30));
  const clients = Array.from({ length: 30 }, (_, i) => `203.0.113.${i}`);
  await Promise.all(
    instances.map(async (limiter, n) => {
      const order = n % 2 === 0 ? clients : [...clients].reverse();
      for (let round = 0; round < 5; round++) {
        const decisions = await Promise.all(order.map((address) => limiter.decide(anonymous(address))));
        await Promise.all(decisions.map((decision) => limiter.release(decision.subject, decision.lease!)));
      }
    }),
  );
  const [row] = await api.database.sql`select sum(used)::int as units, count(*)::int as subjects from paginated_collections.rate_windows`;
  t.same(row, { units: 8 * 5 * 30, subjects: 30 }, 'every request charged exactly once');
  t.equal(await liveLeases(api.database.sql), 0, 'every lease released');
});

t.test('an answer that came while the process was held up past the timeout is used, not a 503', async (t) => {
  const api = await testApp(t, { rateLimit: { timeoutMs: 200 } });
  t.equal((await api.request('/v1')).status, 200); // the client's row now exists
  // The row's lock ends on the database's own timer, 400 ms after it was taken, with no help from this process.
  const row = await holdLock(t, api.database.url, async (sql) => {
    await sql`set idle_in_transaction_session_timeout = 400`;
    await sql`select subject from paginated_collections.rate_windows where subject = 'ip:192.0.2.1' for update`;
  });
  t.teardown(() => row.sql.release());
  const response = api.request('/v1');
  await nextTurn();
  await nextTurn(); // the decision is sent, and waits for the lock
  holdEventLoop(1_000); // meanwhile the lock ends, the decision is answered, and the 200 ms timer falls due
  t.equal((await response).status, 200);
});

t.test('a lease granted after its request was answered 503 is given back', async (t) => {
  const api = await testApp(t, { rateLimit: { timeoutMs: 200 } });
  await setTier(api.database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 1 });
  t.equal((await api.request('/v1')).status, 200); // the client's row now exists
  const row = await lockRow(t, api.database.url, 'ip:192.0.2.1');
  const late = await api.request('/v1');
  t.equal(late.status, 503, 'the decision waits on the lock past the timeout');
  await row.unlock(); // the decision is then made: charged, with a lease
  await waitFor('two units charged to 192.0.2.1', () => chargedUnits(api.database.sql, 'ip:192.0.2.1'), {
    until: (n) => n >= 2,
    timeoutMs: 2_000,
    intervalMs: 20,
  });
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.1'), 2);
  await waitFor('no live lease', () => liveLeases(api.database.sql), { until: (n) => n === 0, timeoutMs: 2_000, intervalMs: 20 });
  t.equal(await liveLeases(api.database.sql), 0, 'its lease is released');
  t.equal((await api.request('/v1')).status, 200, 'the cap of one is free for the next request');
});

t.test('callers that share a statement keep their own deadlines: one that came later is not answered 503 with the first', async (t) => {
  const api = await testApp(t, { rateLimit: true });
  const limiter = databaseLimiter(api.database.sql, 30, 2_000);
  await limiter.decide(anonymous('192.0.2.1')); // the client's row now exists
  const row = await lockRow(t, api.database.url, 'ip:192.0.2.1');
  // Two statements wait on the lock, so what is asked for next waits to be sent, together.
  const held = [limiter.decide(anonymous('192.0.2.1')).catch((error: unknown) => error)];
  await nextTurn();
  held.push(limiter.decide(anonymous('192.0.2.1')).catch((error: unknown) => error));
  await lockWaiters(api.database.sql, api.database.name, 1, 5_000);
  const early = limiter.decide(anonymous('192.0.2.50')).catch((error: unknown) => error);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  let lateSettled = false;
  const late = limiter.decide(anonymous('192.0.2.51')).finally(() => {
    lateSettled = true;
  });
  t.match(await early, { status: 503, code: 'unavailable' }, 'the first is answered 503 by its deadline');
  t.notOk(lateSettled, 'the one that came a second later still waits');
  await row.unlock();
  t.equal((await late).outcome, 'ok', 'and is decided once the statements before it have answered');
  t.match(await Promise.all(held), [{ status: 503 }, { status: 503 }]);
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.50'), 0, 'the one answered 503 was never sent');
  t.equal(await chargedUnits(api.database.sql, 'ip:192.0.2.51'), 1);
});
