// Graceful shutdown: on SIGTERM the server stops accepting, finishes in-flight requests, closes the pool.
import t from 'tap';
import { seedTable } from '../db/seed.ts';
import { testDatabase } from './helpers/db.ts';
import { freePort, startServer } from './helpers/servers.ts';


t.test('SIGTERM drains an in-flight request, refuses new ones, then exits 0', async (t) => {
  const db = await testDatabase(t);
  for (const table of ['products', 'orders', 'events'] as const) await seedTable(db.sql, table, 50);
  const { url, child, output } = await startServer(t, await freePort(), { DATABASE_URL: db.url });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));

  // Hold a lock the request needs: it is then provably in flight inside the server.
  const reserved = await db.sql.reserve();
  await reserved`begin`;
  await reserved`lock table products in access exclusive mode`;
  const inFlight = fetch(`${url}/v1/products?limit=5`);
  const locks = await waitFor(
    () => db.sql`select count(*)::int as waiting from pg_locks where relation = 'products'::regclass and not granted`,
    (rows) => rows[0]!.waiting > 0,
  );
  t.ok(locks[0]!.waiting > 0, 'the request waits on the lock');

  child.kill('SIGTERM');
  await waitFor(async () => output(), (text) => text.includes('SIGTERM'));
  await t.rejects(fetch(`${url}/healthz`), 'a new connection is refused while draining');

  await reserved`commit`;
  reserved.release();
  const res = await inFlight;
  t.equal(res.status, 200, 'the in-flight request completes');
  t.equal((await res.json()).products.length, 5);
  t.equal(await exited, 0, 'the process exits cleanly');
});

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('condition not reached in 5 s');
}
