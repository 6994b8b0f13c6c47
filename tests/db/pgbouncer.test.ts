// Behind PgBouncer in transaction pooling mode: three instances starting at once on a new database (each
// migrating and seeding over DATABASE_DIRECT_URL), 64 clients on one key: exactly the allowance is served,
// cursor walks beside them complete, and no lease is left.
import postgres from 'postgres';
import t from 'tap';
import journal from '../../db/migrations/meta/_journal.json' with { type: 'json' };
import { hashKey } from '../../lib/ratelimit/identity.ts';
import { generateKey } from '../../lib/ratelimit/keys.ts';
import { scratchDatabase } from '../helpers/db.ts';
import { chargedUnits, liveLeases } from '../helpers/limiter.ts';
import { startPgBouncer } from '../helpers/pgbouncer.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

const CLIENTS = 64;
const ALLOWANCE = 100;

t.test('three instances behind PgBouncer in transaction mode', async (t) => {
  const direct = (await scratchDatabase(t)).url;
  const bouncer = await startPgBouncer(t, direct);
  const pooled = bouncer.urlOf(direct);

  // One instance is told by the URL (prepare=false), the others find the pooler out themselves.
  const urls = [pooled, `${pooled}?prepare=false`, pooled];
  const servers = await Promise.all(
    urls.map(async (url) => startServer(t, await freePort(), { DATABASE_URL: url, DATABASE_DIRECT_URL: direct })),
  );
  for (const server of servers) t.match(server.output(), /DATABASE_URL leads to a transaction pooler/);

  const sql = postgres(direct, { max: 2, onnotice: () => {} });
  t.teardown(() => sql.end({ timeout: 1 }));
  const [migrations] = await sql`select count(*)::int as n from paginated_collections.__drizzle_migrations`;
  t.equal(migrations!.n, journal.entries.length, 'each migration applied once');
  const [seeded] =
    await sql`select (select count(*) from demo.products)::int as products, (select count(*) from demo.orders)::int as orders`;
  t.same(seeded, { products: 50_000, orders: 30_000 }, 'seeded once');

  const key = generateKey();
  await sql`insert into paginated_collections.rate_tiers values ('hammer', ${ALLOWANCE}, 600, 1000)`;
  await sql`insert into paginated_collections.api_keys (id, key_hash, prefix, tier) values ('key_hammer', ${hashKey(key)}, 'pck_', 'hammer')`;
  const walker = generateKey();
  await sql`insert into paginated_collections.api_keys (id, key_hash, prefix, tier) values ('key_walker', ${hashKey(walker)}, 'pck_', 'pro')`;

  /** 400 requests for the hammered key from CLIENTS clients, round-robin over the instances. */
  async function hammer(): Promise<number[]> {
    const statuses: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < 400) {
          const server = servers[next++ % servers.length]!;
          const res = await fetch(`${server.url}/v1/products?count=none&limit=20`, { headers: { authorization: `Bearer ${key}` } });
          statuses.push(res.status);
          await res.arrayBuffer();
        }
      }),
    );
    return statuses;
  }

  /** Every order of `status`, by following `next` links through the instances in turn. */
  async function walk(status: string): Promise<number[]> {
    const ids: number[] = [];
    let url: string | undefined = `${servers[0]!.url}/v1/orders?page-size=100&status=${status}`;
    for (let page = 0; url !== undefined; page++) {
      const res = await fetch(url, { headers: { authorization: `Bearer ${walker}` } });
      if (res.status !== 200) throw new Error(`Walk of ${status}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { orders: { id: number }[]; _links: { next?: { href: string } } };
      ids.push(...body.orders.map((order) => order.id));
      // The next chunk from the next instance: a cursor is good at any of them.
      const next = body._links.next?.href;
      url = next === undefined ? undefined : `${servers[(page + 1) % servers.length]!.url}${next.slice(new URL(next).origin.length)}`;
    }
    return ids;
  }

  const statuses = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'];
  const [hammered, ...walks] = await Promise.all([hammer(), ...statuses.map(walk)]);
  const served = hammered!.filter((status) => status === 200).length;
  t.equal(served, ALLOWANCE, `served ${served} of 400 requests for an allowance of ${ALLOWANCE}`);
  t.equal(hammered!.filter((status) => status === 429).length, 400 - ALLOWANCE, 'every other one a 429, no 5xx');
  t.equal(await chargedUnits(sql, 'key:key_hammer'), ALLOWANCE, 'the window holds exactly what was served');

  for (const [at, status] of statuses.entries()) {
    const expected = await sql`select id from demo.orders where status = ${status} order by created_at desc, id desc`;
    t.same(
      walks[at],
      expected.map((row) => row.id),
      `the walk of ${status} orders is complete, in order, each once`,
    );
  }
  t.equal(await liveLeases(sql), 0, 'no lease is left');
  t.notMatch(await bouncer.log(), /not linked|prepared statement .* does not exist/, 'PgBouncer kept every exchange in step');

  await t.test('an instance with no direct URL behind the pooler refuses to start, in one line', async (t) => {
    await t.rejects(
      startServer(t, await freePort(), { DATABASE_URL: pooled }),
      /DATABASE_URL leads to a connection pooler; set DATABASE_DIRECT_URL/,
    );
  });
});
