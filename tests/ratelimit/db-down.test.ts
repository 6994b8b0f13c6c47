// The database stopped and started again under load: quick 503s with Retry-After, no crash, served after.
// Uses a private embedded PostgreSQL; the shared test server is never stopped.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startEmbedded } from '../../db/embedded.ts';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { withSession } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

interface Sample {
  readonly status: number;
  readonly ms: number;
  readonly retryAfter: string | null;
}

t.test('503 while the database is away, served again when it is back', async (t) => {
  const [pgPort, appPort] = [await freePort(), await freePort()];
  const dataDir = await mkdtemp(path.join(tmpdir(), 'limiter-db-down-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  let pg = await startEmbedded({ dataDir, port: pgPort });
  t.teardown(() => pg.stop());
  await runMigrations(pg.url);
  await migrateDemo(pg.url);
  await withSession(pg.url, async (sql) => {
    await seedTable(sql, 'products', 100);
    await seedTable(sql, 'orders', 10);
    await seedTable(sql, 'events', 10);
    await sql`update paginated_collections.rate_tiers set allowance = 1000000, concurrency = 1000 where name = 'anonymous'`;
  });

  const server = await startServer(t, appPort, { DATABASE_URL: pg.url });
  const samples: { phase: string; path: string; sample: Sample }[] = [];
  let phase = 'up';
  let running = true;
  const client = async (route: string) => {
    while (running) {
      const started = performance.now();
      try {
        const res = await fetch(`${server.url}${route}`, { signal: AbortSignal.timeout(10_000) });
        await res.arrayBuffer();
        samples.push({
          phase,
          path: route,
          sample: { status: res.status, ms: performance.now() - started, retryAfter: res.headers.get('retry-after') },
        });
      } catch {
        samples.push({ phase, path: route, sample: { status: 0, ms: performance.now() - started, retryAfter: null } });
      }
      await sleep(20);
    }
  };
  const load = ['/v1/products?count=none', '/v1/products', '/v1', '/readyz'].map(client);
  // Should a wait below fail.
  t.teardown(() => {
    running = false;
  });
  const served = () => samples.filter((s) => s.sample.status === 200).length;
  await waitFor('20 answers of 200 while the database is up', served, { until: (n) => n >= 20, timeoutMs: 10_000 });

  phase = 'stopping';
  await pg.stop();
  phase = 'down';
  const downStart = samples.length;
  await waitFor('20 answers while the database is down', () => samples.length - downStart, { until: (n) => n >= 20, timeoutMs: 20_000 });
  const down = samples.slice(downStart).filter((s) => s.phase === 'down');
  t.ok(down.length >= 20, `${down.length} answers while down`);
  t.same([...new Set(down.map((s) => s.sample.status))], [503], 'all 503');
  t.same([...new Set(down.map((s) => s.sample.retryAfter))], ['1'], 'with Retry-After');
  t.same(
    down.filter((s) => s.sample.ms >= 3000).map((s) => `${s.path}: ${Math.round(s.sample.ms)} ms`),
    [],
    'quick: none took 3 s',
  );
  t.ok(
    down.some((s) => s.path === '/readyz'),
    `/readyz is 503 as well (asked: ${[...new Set(down.map((s) => s.path))].join(', ')})`,
  );
  t.equal(server.child.exitCode, null, 'the server did not crash');

  pg = await startEmbedded({ dataDir, port: pgPort });
  phase = 'back';
  const backStart = samples.length;
  // Served again once the database is back, with no restart.
  const unserved = () => {
    const back = samples.slice(backStart);
    return ['/v1/products', '/v1', '/readyz'].filter((route) => !back.some((s) => s.path === route && s.sample.status === 200));
  };
  await waitFor('a 200 of every route once the database is back', unserved, { until: (routes) => routes.length === 0, timeoutMs: 20_000 });
  running = false;
  await Promise.all(load);
  const bad = samples.filter((s) => s.sample.status === 500 || s.sample.status === 0);
  t.same(bad, [], 'never a 500 or a dropped connection');
  if (bad.length > 0) t.comment(server.output());
});
