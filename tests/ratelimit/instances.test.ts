// Across instances: three server processes on one database; the limit, the cap and the registration
// limit hold exactly for clients hammering all three, and /admin changes apply at the next request.
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { hashKey } from '../../lib/ratelimit/identity.ts';
import { generateKey } from '../../lib/ratelimit/keys.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { scratchSession, testDatabase } from '../helpers/db.ts';
import { chargedUnits, liveLeases } from '../helpers/limiter.ts';
import { freePort } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

const CLIENTS = 64;

/** `total` requests from CLIENTS concurrent clients, spread round-robin over the servers. */
async function hammer(servers: ServerProcess[], total: number, request: (server: ServerProcess) => Promise<Response>) {
  const statuses: number[] = [];
  const codes: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < total) {
        const server = servers[next++ % servers.length]!;
        const res = await request(server);
        statuses.push(res.status);
        if (res.status === 429) codes.push((await res.json()).code);
        else await res.arrayBuffer();
      }
    }),
  );
  const count = (status: number) => statuses.filter((s) => s === status).length;
  return { statuses, codes, count };
}

t.test('three instances, one database', async (t) => {
  const db = await testDatabase(t);
  // Small demo tables: server.ts then seeds nothing and starts fast.
  await seedTable(db.sql, 'products', 200);
  await seedTable(db.sql, 'orders', 50);
  await seedTable(db.sql, 'events', 50);
  const env = { DATABASE_URL: db.url, ADMIN_TOKEN };
  const ports = [await freePort(), await freePort(), await freePort()];
  const servers = await Promise.all(ports.map((port) => startServer(t, port, env)));
  const [a, b, c] = servers as [ServerProcess, ServerProcess, ServerProcess];
  const adminCall = (server: ServerProcess, method: string, path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  await t.test('the registration limit holds across instances: exactly 5 keys per address', async (t) => {
    // The registration tier's cap of 2 requests in flight declines, at random, requests that would otherwise
    // have fitted the allowance (a 429 Concurrency_limit_exceeded, not charged): with it raised, only the
    // allowance decides, and exactly 5 of the 128 are served.
    const raised = await adminCall(a, 'PUT', '/admin/tiers/registration', { limit: 5, windowSeconds: 3600, concurrency: CLIENTS });
    t.equal(raised.status, 200);
    const result = await hammer(servers, 128, (s) => fetch(`${s.url}/v1/keys`, { method: 'POST' }));
    t.equal(result.count(201), 5, `${result.count(201)} keys issued`);
    t.equal(result.count(429), 123);
    t.same(new Set(result.codes), new Set(['Request_limit_exceeded']), 'every other one declined by the allowance');
    const [row] = await db.sql`select count(*)::int as n from paginated_collections.api_keys`;
    t.equal(row!.n, 5);
  });

  const [issued] = await db.sql`select id from paginated_collections.api_keys limit 1`;
  // A key on a tier of its own, with a fresh window.
  const key = generateKey();
  await db.sql`insert into paginated_collections.rate_tiers values ('hammer', 100, 60, 1000)`;
  await db.sql`insert into paginated_collections.api_keys (id, key_hash, prefix, tier) values ('key_hammer', ${hashKey(key)}, 'pck_', 'hammer')`;
  const bearer = { headers: { authorization: `Bearer ${key}` } };

  await t.test('64 clients hammer one key through all three: exactly the allowance is served', async (t) => {
    const result = await hammer(servers, 400, (s) => fetch(`${s.url}/v1/products?count=none&limit=20`, bearer));
    t.equal(result.count(200), 100, `served ${result.count(200)} of 400 (allowance 100 per 60 s, fresh window)`);
    t.equal(result.count(429), 300);
    t.same(new Set(result.codes), new Set(['Request_limit_exceeded']), 'every other one declined by the allowance');
    t.equal(await chargedUnits(db.sql, 'key:key_hammer'), 100, 'the window holds exactly what was served');
  });

  await t.test('the concurrency cap holds across instances: exactly the cap is in flight', async (t) => {
    await db.sql`insert into paginated_collections.rate_tiers values ('capped', 100000, 60, 5)`;
    await db.sql`update paginated_collections.api_keys set tier = 'capped' where id = 'key_hammer'`;
    const reserved = await scratchSession(t, db.url).reserve();
    await reserved`begin`;
    await reserved`lock table demo.products in access exclusive mode`;
    // 64 requests at once; the admitted ones stay in flight on the locked table.
    const pending = Array.from({ length: CLIENTS }, (_, i) =>
      fetch(`${servers[i % 3]!.url}/v1/products?count=none`, bearer).then(async (res) => {
        const body = await res.text();
        return { status: res.status, code: res.status === 429 ? (JSON.parse(body).code as string) : undefined };
      }),
    );
    const declined: { status: number; code: string | undefined }[] = [];
    for (const p of pending) void p.then((r) => r.status === 429 && declined.push(r));
    await waitFor('all but five requests declined', () => declined.length, {
      until: (n) => n >= CLIENTS - 5,
      timeoutMs: 6_000,
      intervalMs: 20,
    });
    t.equal(await liveLeases(db.sql, 'key:key_hammer'), 5, 'five leases are held');
    await reserved`commit`;
    reserved.release();
    const results = await Promise.all(pending);
    t.equal(results.filter((r) => r.status === 200).length, 5, 'exactly the cap was served');
    t.equal(results.filter((r) => r.code === 'Concurrency_limit_exceeded').length, CLIENTS - 5);
    t.equal(await liveLeases(db.sql), 0, 'all leases released');
  });

  await t.test('an /admin change at one instance applies at another from its next request', async (t) => {
    t.equal((await adminCall(a, 'PUT', '/admin/tiers/capped', { limit: 7, windowSeconds: 60, concurrency: 5 })).status, 200);
    const res = await fetch(`${b.url}/v1`, bearer);
    t.equal(res.headers.get('x-ratelimit-limit'), '7', 'tier change seen at instance b');
    await res.arrayBuffer();
    t.equal((await adminCall(a, 'PATCH', '/admin/keys/key_hammer', { tier: 'pro' })).status, 200);
    const moved = await fetch(`${c.url}/v1`, bearer);
    t.equal(moved.headers.get('x-ratelimit-limit'), '6000', 'key tier change seen at instance c');
    await moved.arrayBuffer();
    t.equal(
      (await fetch(`${b.url}/admin/keys/${issued!.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status,
      204,
    );
    t.equal((await adminCall(c, 'DELETE', '/admin/keys/key_hammer', undefined)).status, 204);
    const revoked = await fetch(`${a.url}/v1`, bearer);
    t.equal(revoked.status, 401, 'revocation seen at instance a');
    await revoked.arrayBuffer();
  });
});
