// Data queries have a deadline: behind a lock or on a connection that stopped answering, a request is a
// 503 with Retry-After by the statement timeout (plus the pool timeout), and its lease is released.
import t from 'tap';
import { lockWaiters } from '../helpers/db.ts';
import { liveLeases } from '../helpers/limiter.ts';
import { proxiedService, sample, untilServed } from '../helpers/proxied.ts';
import { waitFor } from '../helpers/wait.ts';

const env = { STATEMENT_TIMEOUT_MS: '1000', POOL_TIMEOUT_MS: '1000' };

t.test('a query behind a table lock is a 503 with Retry-After by the statement timeout; its lease is released', async (t) => {
  const { database, server } = await proxiedService(t, { concurrency: 1, env });
  const lock = await database.sql.reserve();
  t.teardown(() => lock.release());
  await lock`begin`;
  await lock`lock table demo.products in access exclusive mode`;

  const res = await sample(server.url, '/v1/products?count=none', 20_000);
  const ms = Math.round(res.done - res.sent);
  t.comment(`answered ${res.status} after ${ms} ms (statement timeout 1000 ms)`);
  t.equal(res.status, 503);
  t.equal(res.headers?.get('content-type'), 'application/problem+json');
  t.equal(res.status === 503 && JSON.parse(res.body).code, 'unavailable');
  t.equal(res.headers?.get('retry-after'), '1');
  t.ok(ms < 4_000, `within about the statement timeout (${ms} ms)`);
  await waitFor('no live lease', () => liveLeases(database.sql), { until: (n) => n === 0, timeoutMs: 5_000 });
  t.equal(await liveLeases(database.sql), 0, 'its lease is released');

  await lock`commit`;
  t.equal((await sample(server.url, '/v1/products?count=none')).status, 200, 'the client (cap 1) is served next');
});

t.test('a pool connection that stops answering mid-query is a 503 by the deadline', async (t) => {
  const { database, proxy, server } = await proxiedService(t, { concurrency: 1, env });
  t.equal((await sample(server.url, '/v1/products?count=none')).status, 200);
  const lock = await database.sql.reserve();
  t.teardown(() => lock.release());
  await lock`begin`;
  await lock`lock table demo.products in access exclusive mode`;
  const answer = sample(server.url, '/v1/products?count=none', 20_000);
  await lockWaiters(database.sql, database.name, 1);
  proxy.freeze(); // the query's answer, when it comes, is lost, and nothing tells the instance
  await lock`commit`;
  const frozen = await answer;
  const ms = Math.round(frozen.done - frozen.sent);
  t.comment(`answered ${frozen.status} after ${ms} ms (deadline: statement 1000 + pool 1000 ms)`);
  t.equal(frozen.status, 503, 'a 503, not a hang');
  t.equal(frozen.headers?.get('retry-after'), '1');
  t.ok(ms < 5_000, `by the deadline (${ms} ms)`);

  proxy.reset();
  const reset = performance.now();
  const answers = await untilServed(server.url, '/v1/products?count=none');
  const recovery = Math.round(performance.now() - reset);
  t.comment(`after the reset: ${answers.map((s) => s.status).join(' ')}`);
  t.ok(recovery <= 2_000, `served again within 2 s of the reset, the cap of 1 free again (${recovery} ms)`);
  t.equal(await liveLeases(database.sql), 0, 'no lease left');
});

t.test('a planner estimate behind a table lock is a 503 by the statement timeout, and is not kept', async (t) => {
  // A statement timeout well under the second an estimate is kept (lib/pagination/count.ts): a failure kept
  // like an answer would fail the next default chunk too.
  const { database, server } = await proxiedService(t, { env: { STATEMENT_TIMEOUT_MS: '200', POOL_TIMEOUT_MS: '1000' } });
  const lock = await database.sql.reserve();
  t.teardown(() => lock.release());
  await lock`begin`;
  await lock`lock table demo.products in access exclusive mode`;
  const blocked = await sample(server.url, '/v1/products', 20_000);
  t.equal(blocked.status, 503, "the default chunk's estimate, priced before the limiter's decision, times out");
  t.equal(blocked.status === 503 && JSON.parse(blocked.body).code, 'unavailable');
  await lock`commit`;
  const next = await sample(server.url, '/v1/products');
  t.ok(next.done - blocked.sent < 1_000, `within the second the estimate would be kept (${Math.round(next.done - blocked.sent)} ms)`);
  t.equal(next.status, 200, 'the next request asks the planner again and is served');
});
