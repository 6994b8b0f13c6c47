// DATABASE_POOL_SIZE: the data queries of a server never hold more PostgreSQL backends than it says; the
// queries beyond it wait for a connection of the pool, and are served once one is free.
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { lockWaiters, testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { sample } from '../helpers/proxied.ts';
import { startServer } from '../helpers/servers.ts';
import { sleep } from '../helpers/wait.ts';

t.test('a pool of 3: three data queries at a time, the others queued behind them', async (t) => {
  const database = await testDatabase(t);
  await seedTable(database.sql, 'products', 50);
  await database.sql`update paginated_collections.rate_tiers set allowance = 1000000, concurrency = 1000 where name = 'anonymous'`;
  const server = await startServer(t, await freePort(), {
    DATABASE_URL: database.url,
    DATABASE_POOL_SIZE: '3',
    STATEMENT_TIMEOUT_MS: '30000',
    POOL_TIMEOUT_MS: '30000',
  });
  t.equal((await sample(server.url, '/v1/products?count=none')).status, 200);

  // Every data query waits on a lock: the pool opens as many connections as it may, and no more. Each
  // request asks for another chunk: requests for the same chunk at the same time share one statement.
  const lock = await database.sql.reserve();
  t.teardown(() => lock.release());
  await lock`begin`;
  await lock`lock table demo.products in access exclusive mode`;
  const queries = Array.from({ length: 12 }, (_, i) => sample(server.url, `/v1/products?count=none&priceCents[gte]=${100 + i}`, 60_000));
  await lockWaiters(database.sql, database.name, 3);
  await sleep(500); // time for a fourth connection to be opened, were the pool larger
  // The test's own pool is named 'collections' too, but none of its sessions waits on the lock.
  const [row] = await database.sql`
    select count(*)::int as waiting from pg_stat_activity
    where datname = ${database.name} and application_name = 'collections' and wait_event_type = 'Lock'`;
  t.equal(row!.waiting, 3, 'three data queries run, each waiting on the lock; the other nine wait for a connection');
  await lock`commit`;
  const served = await Promise.all(queries);
  t.same(
    served.map((s) => s.status),
    queries.map(() => 200),
    'the queued queries are served once the lock is gone',
  );
});
