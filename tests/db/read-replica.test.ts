// A read replica: a real streaming standby (pg_basebackup -R of a private primary). Collection queries go to
// DATABASE_READ_URL, the limiter and keys stay on the primary, cursors walk exactly on the replica, a row
// written on the primary shows after the replica's lag; a standby as DATABASE_URL is refused in one line.

import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import t from 'tap';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { startCluster } from '../helpers/cluster.ts';
import { scratchSession } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

interface OrdersChunk {
  orders: { id: number }[];
  _links: { next?: { href: string } };
}

t.test('collection queries on a streaming standby', async (t) => {
  const primary = await startCluster(t);
  await runMigrations(primary.url());
  await migrateDemo(primary.url());
  const writer = scratchSession(t, primary.url());
  await seedTable(writer, 'products', 100);
  await seedTable(writer, 'orders', 500);
  await seedTable(writer, 'events', 50);
  const standby = await startCluster(t, {}, { standbyOf: primary });
  const reader = scratchSession(t, standby.url());
  const [recovery] = await reader`select pg_is_in_recovery() as standby`;
  t.equal(recovery!.standby, true, 'the copy is a standby');

  await t.test('a standby as DATABASE_URL stops start-up with one line naming the fix', async (t) => {
    await t.rejects(
      startServer(t, await freePort(), { DATABASE_URL: standby.url() }),
      /DATABASE_URL leads to a standby, which refuses writes; set DATABASE_URL to the primary and DATABASE_READ_URL to the standby/,
    );
  });

  const server = await startServer(t, await freePort(), {
    DATABASE_URL: primary.url(),
    DATABASE_READ_URL: standby.url(),
    ADMIN_TOKEN,
  });
  const get = async (path: string, key?: string) => {
    const res = await fetch(`${server.url}${path}`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
    return { status: res.status, body: await res.json() };
  };

  await t.test('a cursor walk on the replica is exact while the primary takes new orders', async (t) => {
    const before = await writer`select id from demo.orders order by created_at desc, id desc`;
    let url: string | undefined = `${server.url}/v1/orders?page-size=40`;
    const walked: number[] = [];
    while (url !== undefined) {
      // Newer orders arrive on the primary (and reach the replica) while the walk goes on, once it has a
      // position: they sort before it. (Before the first chunk they would be in it, as they should.)
      if (walked.length > 0)
        await writer`insert into demo.orders (customer_id, status, total_cents, created_at) values (1, 'paid', 100, now())`;
      const res = await fetch(url);
      t.equal(res.status, 200);
      const chunk = (await res.json()) as OrdersChunk;
      walked.push(...chunk.orders.map((order) => order.id));
      url = chunk._links.next?.href;
    }
    t.same(
      walked,
      before.map((row) => row.id),
      'every order that was there, in order, each once',
    );
  });

  await t.test("/metrics shows the replica's pool beside the primary's: the walk's queries went to it", async (t) => {
    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    t.equal(res.status, 200);
    const connections = parsePrometheusTextFormat(await res.text()).find((family) => family.name === 'db_pool_connections');
    const open = (pool: string) =>
      (connections?.metrics ?? []).filter((m) => m.labels?.pool === pool).reduce((sum, m) => sum + Number(m.value), 0);
    t.ok(open('replica') >= 1, `the replica's pool has open connections (${open('replica')})`);
    t.ok(
      connections?.metrics.some((m) => m.labels?.pool === 'primary'),
      "and the primary's pool is there too",
    );
  });

  await t.test('with replay paused, a new row shows only once the replica has it; keys and limits stay on the primary', async (t) => {
    await reader`select pg_wal_replay_pause()`;
    t.teardown(() => reader`select pg_wal_replay_resume()`.catch(() => {}));
    const [row] =
      await writer`insert into demo.orders (customer_id, status, total_cents, created_at) values (424242, 'paid', 100, now()) returning id`;
    const lagging = await get('/v1/orders?customerId=424242');
    t.equal(lagging.status, 200);
    t.same(lagging.body.orders, [], 'the replica does not have it yet: the chunk is as of the replica');

    // A key issued now is written on the primary and used at once: the limiter reads keys there.
    const issued = await fetch(`${server.url}/v1/keys`, { method: 'POST' });
    t.equal(issued.status, 201);
    const { key } = (await issued.json()) as { key: string };
    const withKey = await fetch(`${server.url}/v1`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(withKey.status, 200, 'the new key is known at once, though the replica has not replayed it');
    t.not(withKey.headers.get('x-ratelimit-limit'), '60', "charged to the key's tier, not the anonymous one");
    await withKey.arrayBuffer();

    await reader`select pg_wal_replay_resume()`;
    const caughtUp = await waitFor('the replica to replay the new order', () => get('/v1/orders?customerId=424242'), {
      until: (answer) => answer.body.orders?.length === 1,
    });
    t.equal(caughtUp.body.orders[0].id, Number(row!.id), 'after the lag, the row is there');
  });
});
