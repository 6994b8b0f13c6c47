// LIMITER_DATABASE_URL in another order on another instance (issue 39, item 5): two server processes list
// the same two limiter databases in opposite orders. The source of truth for keys and tiers, and the order in
// which a change locks rows on the databases, must be the same at both, or concurrent changes through the two
// lock in opposite orders on two servers and wait for each other until the statement timeout (503s after 5 s),
// and each instance reads its own first database. And one database named twice, by two spellings, is refused.
import { spawn } from 'node:child_process';
import t from 'tap';
import { databaseIdentity } from '../../db/identity.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { scratchSession, testDatabase } from '../helpers/db.ts';
import { childEnv, freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

const data = await testDatabase(t);
const limiterDatabases = [await testDatabase(t), await testDatabase(t)];
const urls = limiterDatabases.map((database) => database.url);
const limiters = urls.map((url) => scratchSession(t, url));

const env = (list: string[]) => ({ DATABASE_URL: data.url, LIMITER_DATABASE_URL: list.join(','), ADMIN_TOKEN, TRUST_PROXY: 'loopback' });
const servers = [await startServer(t, await freePort(), env(urls)), await startServer(t, await freePort(), env([...urls].reverse()))];

/** An operator request through server `i`: its status, body and how long it took. */
async function admin(i: number, method: string, path: string, body?: unknown) {
  const started = performance.now();
  const res = await fetch(`${servers[i]!.url}/admin${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, ms: performance.now() - started };
}

/** What each limiter database holds of keys and tiers, as comparable text. */
const holdings = () =>
  Promise.all(
    limiters.map(async (sql) =>
      JSON.stringify([
        await sql`select * from paginated_collections.rate_tiers order by name`,
        await sql`select id, encode(key_hash, 'hex') as hash, prefix, name, tier, created_at, revoked_at from paginated_collections.api_keys order by id`,
      ]),
    ),
  );

const tier = (limit: number) => ({ limit, windowSeconds: 3600, concurrency: 1000 });
const keyIds: string[] = [];

t.test('both instances name the same source of truth', async (t) => {
  const sources = servers.map((server) => /keys and tiers from ([^\s,]+)/.exec(server.output())?.[1]);
  t.ok(sources[0], `instance 0 names it (${sources[0]})`);
  t.equal(sources[1], sources[0], 'instance 1 names the same database');
});

t.test('concurrent changes through both instances all answer in time, and every database ends the same', async (t) => {
  for (const name of ['registration', 'alpha', 'beta']) {
    const { status } = await admin(0, 'PUT', `/tiers/${name}`, tier(1000));
    t.ok(status === 200 || status === 201, `${name}: ${status}, a 200 or 201`);
  }
  for (let i = 0; i < 10; i++) {
    const res = await fetch(`${servers[i % 2]!.url}/v1/keys`, { method: 'POST' });
    t.equal(res.status, 201, 'a key issued');
    keyIds.push(((await res.json()) as { id: string }).id);
  }
  // Each key moved to alpha through one instance and to beta through the other at once, and each tier
  // changed through both at once: on the code that took each instance's first URL as the source, most
  // such pairs waited for each other on the two databases until the statement timeout (5 s), then 503.
  const changes = [
    ...keyIds.flatMap((id) => [admin(0, 'PATCH', `/keys/${id}`, { tier: 'alpha' }), admin(1, 'PATCH', `/keys/${id}`, { tier: 'beta' })]),
    ...[0, 1, 2, 3, 4].flatMap((i) => [admin(0, 'PUT', '/tiers/alpha', tier(100 + i)), admin(1, 'PUT', '/tiers/alpha', tier(200 + i))]),
    ...[0, 1, 2, 3, 4].flatMap((i) => [admin(1, 'PUT', '/tiers/beta', tier(300 + i)), admin(0, 'PUT', '/tiers/beta', tier(400 + i))]),
  ];
  const answers = await Promise.all(changes);
  const late = answers.filter((answer) => answer.status !== 200 || answer.ms > 3000);
  t.same(
    late.map((answer) => `${answer.status} after ${Math.round(answer.ms)} ms: ${answer.text.slice(0, 120)}`),
    [],
    `all ${answers.length} changes answered 200 within 3 s (slowest ${Math.round(Math.max(...answers.map((a) => a.ms)))} ms)`,
  );
  const [first, second] = await holdings();
  t.equal(second, first, 'both limiter databases hold the same keys and tiers');
  const tiers = await Promise.all([admin(0, 'GET', '/tiers'), admin(1, 'GET', '/tiers')]);
  t.equal(tiers[1].text, tiers[0].text, 'the tiers read the same through either instance');
});

t.test('keys and tiers read the same through either instance when the databases differ', async (t) => {
  // A change half made (a database lost in its very commit) leaves the databases apart until the next
  // start-up: each instance must still read the one source, not its own first URL.
  await limiters[0]!`update paginated_collections.rate_tiers set allowance = 7 where name = 'alpha'`;
  await limiters[1]!`update paginated_collections.rate_tiers set allowance = 9 where name = 'alpha'`;
  const tiers = await Promise.all([admin(0, 'GET', '/tiers'), admin(1, 'GET', '/tiers')]);
  t.equal(tiers[1].text, tiers[0].text, 'GET /admin/tiers answers the same through both');

  const id = keyIds[0]!;
  await limiters[0]!`update paginated_collections.api_keys set revoked_at = clock_timestamp() where id = ${id}`;
  const through0 = await admin(0, 'PATCH', `/keys/${id}`, { tier: 'beta' });
  const through1 = await admin(1, 'PATCH', `/keys/${id}`, { tier: 'beta' });
  t.equal(through1.status, through0.status, 'a key revoked on one database only: either instance answers the same about it');
});

t.test('one database named twice, by two spellings of its host, is refused in one line naming both', async (t) => {
  const byName = new URL(urls[0]!);
  byName.hostname = 'localhost';
  const list = [urls[0]!, byName.toString()];
  const port = await freePort();
  const child = spawn(process.execPath, ['server.ts'], {
    cwd: new URL('../..', import.meta.url),
    env: childEnv({ COLLECTIONS: 'demo', ...env(list), PORT: String(port) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  t.teardown(() => child.kill('SIGKILL'));
  // An instance that starts anyway listens rather than exits: given 30 s, then stopped.
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearTimeout(timer);
  t.equal(code, 1, 'the instance exits 1');
  const lines = stderr.trim().split('\n');
  t.equal(lines.length, 1, `one line: ${stderr.trim()}`);
  t.match(lines[0], databaseIdentity(list[0]!), 'naming the first spelling');
  t.match(lines[0], databaseIdentity(list[1]!), 'and the second');
});
