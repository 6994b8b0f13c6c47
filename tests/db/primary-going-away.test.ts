// A primary that goes read-only under load (as pg_auto_failover's demotes it), on two private clusters named by one
// host list (target_session_attrs=read-write): the limiter's decisions refused as read-only (SQLSTATE 25006) are
// sent once more on a fresh connection, which goes to the host that takes writes, so clients see no error at all;
// with no host taking writes, every request is a 503 with Retry-After, never a 500; and no request is charged
// but those answered 200, each once (docs/explanation/faults.md, "A failover").
import type { Sql } from 'postgres';
import t from 'tap';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { scratchSession, withSession } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { sleep } from '../helpers/wait.ts';

const clusters: Cluster[] = await Promise.all([startCluster(t), startCluster(t)]);
for (const cluster of clusters) {
  await runMigrations(cluster.url());
  await migrateDemo(cluster.url());
  await withSession(cluster.url(), async (sql) => {
    await seedTable(sql, 'products', 20);
    await seedTable(sql, 'orders', 5);
    await seedTable(sql, 'events', 5);
    await sql`update paginated_collections.rate_tiers set allowance = 1000000, concurrency = 1000 where name = 'anonymous'`;
  });
}
const [a, b] = clusters as [Cluster, Cluster];
const sessions: Sql[] = clusters.map((cluster) => scratchSession(t, cluster.url()));
const server = await startServer(t, await freePort(), {
  DATABASE_URL: `postgres://postgres@127.0.0.1:${a.port},127.0.0.1:${b.port}/postgres?target_session_attrs=read-write`,
});

/** Makes a cluster's transactions read-only by default, or read-write again, for every session (a reload). */
async function readOnly(index: number, on: boolean): Promise<void> {
  const sql = sessions[index]!;
  await sql.unsafe(`alter system set default_transaction_read_only = ${on ? 'on' : 'off'}`);
  await sql`select pg_reload_conf()`;
  // Once this session sees it, the reload has reached the backends (each applies it before its next statement).
  for (;;) {
    const [row] = await sql`select current_setting('default_transaction_read_only') as value`;
    if (row!.value === (on ? 'on' : 'off')) return;
    await sleep(10);
  }
}

/** The units charged on both clusters: every decision admitted and committed, once. */
async function charged(): Promise<number> {
  let units = 0;
  for (const sql of sessions) {
    const [row] = await sql`select coalesce(sum(u), 0)::int as units from paginated_collections.rate_windows, unnest(units) u`;
    units += row!.units as number;
  }
  return units;
}

interface Answer {
  readonly status: number;
  readonly code?: string;
  readonly retryAfter?: string | null;
}

/** Six clients sending GET /v1 (one unit each, no data query) while `during` runs, and a moment after. */
async function underLoad(during: () => Promise<void>): Promise<Answer[]> {
  const answers: Answer[] = [];
  let running = true;
  const clients = Array.from({ length: 6 }, async () => {
    while (running) {
      const res = await fetch(`${server.url}/v1`);
      const body = (await res.json()) as { code?: string };
      answers.push({ status: res.status, ...(res.status === 200 ? {} : { code: body.code, retryAfter: res.headers.get('retry-after') }) });
    }
  });
  await sleep(300);
  await during();
  await sleep(500);
  running = false;
  await Promise.all(clients);
  return answers;
}

const served = (answers: Answer[]) => answers.filter((answer) => answer.status === 200).length;
let admitted = 0;

t.test('the first host goes read-only: the decisions it refuses are sent again to the second, and every request is served', async (t) => {
  const answers = await underLoad(() => readOnly(0, true));
  t.same(
    answers.filter((answer) => answer.status !== 200),
    [],
    'no 503, no 500: each refused decision went again, to the host that takes writes',
  );
  admitted += served(answers);
  t.equal(await charged(), admitted, 'each request served charged once, the refused decisions nowhere');
  const [row] = await sessions[1]!`select count(*)::int as n from paginated_collections.rate_windows`;
  t.ok(row!.n > 0, 'the second host decides now');
});

t.test('both read-only: every request a 503 unavailable with Retry-After, never a 500, and none charged', async (t) => {
  const answers = await underLoad(() => readOnly(1, true));
  const failed = answers.filter((answer) => answer.status !== 200);
  t.ok(failed.length > 20, `503s once neither takes writes (${failed.length})`);
  t.same(
    failed.filter((answer) => !(answer.status === 503 && answer.code === 'unavailable' && answer.retryAfter === '1')),
    [],
    'each a 503 unavailable with Retry-After: 1',
  );
  admitted += served(answers);
  t.equal(await charged(), admitted, 'only the requests served are charged');
});

t.test('the first takes writes again: served again within a second, and still each charged once', async (t) => {
  const restored = performance.now();
  const answers: (Answer & { at: number })[] = [];
  await readOnly(0, false);
  for (;;) {
    const at = performance.now() - restored;
    const res = await fetch(`${server.url}/v1`);
    await res.arrayBuffer();
    answers.push({ status: res.status, at });
    if (res.status === 200 || at > 5000) break;
    await sleep(20);
  }
  t.equal(answers.at(-1)!.status, 200, `served again ${Math.round(answers.at(-1)!.at)} ms after`);
  t.ok(answers.at(-1)!.at < 1000, 'within a second');
  admitted += served(answers);
  await readOnly(1, false);
  const more = await underLoad(async () => {});
  t.same(
    more.filter((answer) => answer.status !== 200),
    [],
    'then every request served',
  );
  admitted += served(more);
  t.equal(await charged(), admitted, 'each charged once');
  t.equal(server.child.exitCode, null, 'the server never stopped');
});
