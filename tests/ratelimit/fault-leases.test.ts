// Leases of requests that ended while the database was away are released once it is back, not after
// their TTL: a client at its concurrency cap is served again at once. A release waiting behind a frozen
// statement goes on the connection that replaces it.
import t from 'tap';
import { openDatabase } from '../../db/client.ts';
import { databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { lockWaiters, testDatabase } from '../helpers/db.ts';
import { anonymousInput, liveLeases } from '../helpers/limiter.ts';
import { proxiedService, sample, untilServed } from '../helpers/proxied.ts';
import { startProxy } from '../helpers/tcp-proxy.ts';
import { sleep } from '../helpers/wait.ts';

t.test('a client at its cap when the database went away is served right after it is back', async (t) => {
  const { database, proxy, server } = await proxiedService(t, { concurrency: 2, env: { STATEMENT_TIMEOUT_MS: '30000' } });
  // The client's two requests hold its two slots: their data queries wait behind a table lock. Two chunks
  // (requests for the same chunk at the same time share one statement).
  const lock = await database.sql.reserve();
  t.teardown(() => lock.release());
  await lock`begin`;
  await lock`lock table demo.products in access exclusive mode`;
  const holding = [sample(server.url, '/v1/products?count=none'), sample(server.url, '/v1/products?count=none&offset=1')];
  await lockWaiters(database.sql, database.name, 2);
  t.equal((await sample(server.url, '/v1')).status, 429, 'the client is at its cap');

  // The database goes away while they are in flight: they end (503) and their releases fail.
  proxy.reset();
  proxy.accept('refuse');
  await lock`commit`;
  const ended = await Promise.all(holding);
  t.same(
    ended.map((s) => s.status),
    [503, 503],
    'the requests in flight are answered 503',
  );
  t.equal(await liveLeases(database.sql), 2, 'their leases are still held');
  await sleep(3_000);

  proxy.accept('pass');
  const back = performance.now();
  const answers = await untilServed(server.url, '/v1').catch((error: Error) => {
    t.comment(server.output());
    throw error;
  });
  const ms = Math.round(performance.now() - back);
  t.comment(
    `first 200 ${ms} ms after the database is back; before it: ${
      answers
        .slice(0, -1)
        .map((s) => s.status)
        .join(' ') || 'none'
    }`,
  );
  t.ok(ms <= 2_000, `served again within 2 s of the database being back (${ms} ms), not after the 30 s lease TTL`);
  t.equal(await liveLeases(database.sql), 0, 'no lease left');
});

t.test('a release waiting behind a statement whose connection froze goes on the connection that replaces it', async (t) => {
  const database = await testDatabase(t);
  const proxy = await startProxy(t, database.url);
  // The limiter's own connection through the proxy, taken for dead 1.3 s after a statement goes unanswered.
  const proxied = openDatabase(proxy.urlOf(database.url), { max: 1, limiterTimeoutMs: 300 });
  t.teardown(() => proxied.close());
  const limiter = databaseLimiter(proxied.limiter, 30, 10_000);
  const lease = (await limiter.decide(anonymousInput('192.0.2.1'))).lease!;
  t.equal(await liveLeases(database.sql, 'ip:192.0.2.1'), 1);

  proxy.freeze();
  const frozen = limiter.decide(anonymousInput('192.0.2.2'));
  frozen.catch(() => {});
  await sleep(50);
  // The release waits for the statement in flight, which never answers.
  const asked = performance.now();
  await limiter.release('ip:192.0.2.1', lease);
  const ms = Math.round(performance.now() - asked);
  await t.rejects(frozen, /no answer in/, 'the frozen decision is given up on');
  t.ok(ms < 5_000, `the release was made on the new connection, ${ms} ms after it was asked for`);
  t.equal(await liveLeases(database.sql, 'ip:192.0.2.1'), 0, 'the lease is free');
});
