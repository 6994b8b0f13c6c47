// /readyz says whether the database answers: a pool busy with slow client queries is still ready; a
// database that is away is not.
import t from 'tap';
import { lockWaiters } from '../helpers/db.ts';
import { proxiedService, sample, untilServed } from '../helpers/proxied.ts';

t.test('/readyz is 200 while the pool is full of slow queries, 503 while the database is away', async (t) => {
  const { database, proxy, server } = await proxiedService(t, { env: { STATEMENT_TIMEOUT_MS: '30000', POOL_TIMEOUT_MS: '30000' } });
  t.equal((await sample(server.url, '/readyz')).status, 200);

  // Every connection of the pool (10) waits on a lock, with more queries queued behind them: each request
  // asks for another chunk, since requests for the same chunk at the same time share one statement.
  const lock = await database.sql.reserve();
  t.teardown(() => lock.release());
  await lock`begin`;
  await lock`lock table demo.products in access exclusive mode`;
  const slow = Array.from({ length: 30 }, (_, i) => sample(server.url, `/v1/products?count=none&priceCents[gte]=${100 + i}`, 60_000));
  await lockWaiters(database.sql, database.name, 10);
  const probes = [];
  for (let i = 0; i < 5; i++) probes.push(await sample(server.url, '/readyz'));
  const slowest = Math.round(Math.max(...probes.map((s) => s.done - s.sent)));
  t.comment(`/readyz with the pool full: ${probes.map((s) => s.status).join(' ')}, slowest ${slowest} ms`);
  t.same(
    probes.map((s) => s.status),
    [200, 200, 200, 200, 200],
    'ready',
  );
  t.ok(slowest < 1_000, `quickly (${slowest} ms)`);
  await lock`commit`;
  const served = await Promise.all(slow);
  t.same(
    served.filter((s) => s.status !== 200),
    [],
    'the slow queries (all 30) are served once the lock is gone',
  );

  proxy.reset();
  proxy.accept('refuse');
  const refused = await sample(server.url, '/readyz');
  t.comment(`database refusing connections: /readyz ${refused.status} in ${Math.round(refused.done - refused.sent)} ms`);
  t.equal(refused.status, 503, 'not ready while the database refuses connections');
  proxy.accept('blackhole');
  const silent = await sample(server.url, '/readyz');
  t.comment(`database not answering: /readyz ${silent.status} in ${Math.round(silent.done - silent.sent)} ms`);
  t.equal(silent.status, 503, 'not ready while the database does not answer');
  t.ok(silent.done - silent.sent < 4_000, 'answered by the readiness timeout');

  proxy.accept('pass');
  const back = performance.now();
  await untilServed(server.url, '/readyz');
  const ms = Math.round(performance.now() - back);
  t.ok(ms <= 2_000, `ready again within 2 s of the database being back (${ms} ms)`);
});
