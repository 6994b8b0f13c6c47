// The typed client (`paginated-collections/client`) against the running service over HTTP: walks a whole
// filtered collection once under a tiny allowance (waiting out 429s, never past Reset; or pacing itself to
// meet none), follows poll links, retries a real 503 a bounded number of times, and throws problems typed.
import { createClient, type FetchFunction, ProblemError } from 'paginated-collections/client';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { setTier } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';

interface Seen {
  readonly at: number;
  readonly status: number;
  readonly reset: number;
}

/** fetch from one client address (the test app's socket address header), recording every answer. */
function recordingFetch(address: string, seen: Seen[]): FetchFunction {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('x-test-socket', address);
    const response = await fetch(input, { ...init, headers });
    seen.push({ at: Date.now() / 1000, status: response.status, reset: Number(response.headers.get('x-ratelimit-reset')) });
    return response;
  };
}

t.test('the client walks a filtered collection, waits out 429s, polls, and throws typed problems', async (t) => {
  const api = await testApp(t, { seed: { products: 40, orders: 150, events: 10 }, rateLimit: true, statementTimeoutMs: 300 });
  const baseUrl = await listening(t, api.app);
  const { sql } = api.database;
  const paid = (await sql`select id from demo.orders where status = 'paid' order by created_at desc, id desc`).map((row) => Number(row.id));
  t.ok(paid.length > 15, `${paid.length} paid orders: several chunks of 5`);

  await t.test('a walk under a tiny allowance returns every item once, waiting each 429 out until Reset', async (t) => {
    await setTier(sql, 'anonymous', { allowance: 2, windowSeconds: 1, concurrency: 5 });
    const seen: Seen[] = [];
    const client = createClient({ baseUrl, fetch: recordingFetch('192.0.2.10', seen) });
    const ids: number[] = [];
    for await (const order of client.list('orders', { status: 'paid', 'page-size': 5 })) {
      t.equal(order.status, 'paid');
      ids.push(order.id);
    }
    t.same(ids, paid, 'every paid order once, in order');
    const limited = seen.filter((answer) => answer.status === 429);
    t.ok(limited.length > 0, `it met ${limited.length} 429s and waited them out`);
    seen.forEach((answer, at) => {
      if (answer.status !== 429) return;
      const retry = seen[at + 1]!;
      t.equal(retry.status, 200, 'the retry after a 429 is served');
      t.ok(retry.at <= answer.reset + 0.5, `retried by Reset (${(retry.at - answer.reset).toFixed(2)} s from it)`);
    });
  });

  await t.test('with pace on, the same walk spreads its requests and meets no 429', async (t) => {
    await setTier(sql, 'anonymous', { allowance: 4, windowSeconds: 1, concurrency: 5 });
    const seen: Seen[] = [];
    const client = createClient({ baseUrl, pace: true, fetch: recordingFetch('192.0.2.11', seen) });
    const ids: number[] = [];
    for await (const chunk of client.list('orders', { status: 'paid', 'page-size': 5 }).chunks()) {
      t.equal(chunk.pageSize, 5);
      ids.push(...chunk.orders.map((order) => order.id));
    }
    t.same(ids, paid, 'every paid order once, chunk by chunk');
    t.same(
      seen.map((answer) => answer.status),
      seen.map(() => 200),
      'no 429',
    );
  });

  await setTier(sql, 'anonymous', { allowance: 1000, windowSeconds: 60, concurrency: 5 });

  await t.test('problems arrive as typed errors', async (t) => {
    const client = createClient({ baseUrl });
    const bad = await t.rejects(async () => {
      for await (const _ of client.list('products', { limit: 500 })) t.fail('no item');
    });
    t.ok(bad instanceof ProblemError);
    const problem = bad as ProblemError;
    t.equal(problem.status, 400);
    t.equal(problem.code, 'invalid_parameter');
    t.equal(problem.detail, 'limit must be an integer from 1 to 100');
    t.same(problem.invalidParams, [{ name: 'limit', reason: 'must be an integer from 1 to 100' }]);

    const keyed = createClient({ baseUrl, apiKey: `pck_${'A'.repeat(32)}` });
    await t.rejects(keyed.get('/v1/products'), { name: 'ProblemError', status: 401, code: 'invalid_api_key' });
    await t.rejects(client.get('/v1/nope'), { name: 'ProblemError', status: 404, code: 'not_found' });
  });

  await t.test('a 429 longer than the cap is thrown at once', async (t) => {
    await setTier(sql, 'anonymous', { allowance: 1, windowSeconds: 60, concurrency: 5 });
    const client = createClient({ baseUrl, maxWaitSeconds: 5, fetch: recordingFetch('192.0.2.12', []) });
    await client.get('/v1/products?limit=1&count=none');
    const started = Date.now();
    await t.rejects(client.get('/v1/products?limit=1&count=none'), { status: 429, code: 'Request_limit_exceeded' });
    t.ok(Date.now() - started < 2000, 'without waiting the minute out');
    await setTier(sql, 'anonymous', { allowance: 1000, windowSeconds: 60, concurrency: 5 });
  });

  await t.test('a 503 with Retry-After is retried a bounded number of times', async (t) => {
    // A real 503: the chunk's query waits behind a table lock past the statement timeout (300 ms).
    const lock = await sql.reserve();
    t.teardown(() => lock.release());
    await lock`begin`;
    await lock`lock table demo.products in access exclusive mode`;
    const seen: Seen[] = [];
    const bounded = createClient({ baseUrl, maxUnavailableRetries: 1, fetch: recordingFetch('192.0.2.13', seen) });
    await t.rejects(bounded.get('/v1/products?limit=1&count=none'), { status: 503, code: 'unavailable' });
    t.same(
      seen.map((answer) => answer.status),
      [503, 503],
      'tried once and retried once',
    );
    // Released while the client waits its Retry-After: the retry is served.
    const patient = createClient({ baseUrl, fetch: recordingFetch('192.0.2.14', seen) });
    const served = patient.get('/v1/products?limit=1&count=none');
    // postgres.js runs a query once it is awaited or then-ed.
    setTimeout(() => lock`rollback`.then(() => {}), 600);
    const chunk = (await served) as { products: unknown[] };
    t.equal(chunk.products.length, 1, 'served once the lock is gone');
  });

  await t.test("follow: 'poll' waits at the newest chunk and brings what arrives", async (t) => {
    const controller = new AbortController();
    const client = createClient({ baseUrl });
    const ids: number[] = [];
    let inserted: number | undefined;
    for await (const event of client.list(
      'events',
      { after: '2000-01-01T00:00:00Z', 'page-size': 4 },
      { follow: 'poll', interval: 100, signal: controller.signal },
    )) {
      ids.push(event.id);
      if (ids.length === 10) {
        const [row] = await sql`insert into demo.events (type, source, message) values ('login', 'web', 'polled') returning id`;
        inserted = Number(row!.id);
      }
      if (event.id === inserted) controller.abort();
    }
    t.equal(ids.length, 11, 'the ten events, then the one inserted while polling');
    t.equal(ids.at(-1), inserted);
  });
});
