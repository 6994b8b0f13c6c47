// Connections that go silent (bytes dropped both ways for 45 s) and are then reset, or whose backends are
// terminated: the instance serves again at once, by itself, with no 500 and no hung request.
import t from 'tap';
import { proxiedService, type Sample, steadyLoad } from '../helpers/proxied.ts';
import { sleep } from '../helpers/wait.ts';

const FREEZE_MS = 45_000;

/** Milliseconds from `since` to the first 200 of `path` answered after it; Infinity when none came. */
function firstServed(samples: Sample[], path: string, since: number): number {
  const served = samples.filter((s) => s.path === path && s.status === 200 && s.done >= since);
  return served.length === 0 ? Infinity : Math.min(...served.map((s) => s.done)) - since;
}

t.test('frozen for 45 s, then reset: served again within 2 s of the reset, /readyz too', async (t) => {
  const { proxy, server } = await proxiedService(t);
  // The default chunk counts: its planner estimate is asked for before the limiter's decision, and must be
  // bounded like the chunk's own queries.
  const paths = ['/v1/products?count=none', '/v1/products', '/v1', '/readyz'];
  const load = steadyLoad(server.url, [...paths, '/v1/products?count=none'], 50);
  await sleep(2_000);
  t.same(
    paths.filter((path) => !load.samples.some((s) => s.path === path && s.status === 200)),
    [],
    'served before: a 200 on every path',
  );

  proxy.freeze();
  const frozenAt = performance.now();
  await sleep(FREEZE_MS);
  proxy.reset();
  const resetAt = performance.now();
  await sleep(5_000);
  await load.stop();

  for (const path of paths) {
    const ms = firstServed(load.samples, path, resetAt);
    t.comment(`${path}: first 200 ${Math.round(ms)} ms after the reset`);
    t.ok(ms <= 2_000, `${path} is served within 2 s of the reset (${Math.round(ms)} ms)`);
  }
  const settled = load.samples.filter((s) => s.sent >= resetAt + 2_000);
  t.ok(settled.length > 20, 'requests kept coming after the reset');
  t.same(
    settled.filter((s) => s.status !== 200).map((s) => `${s.path} ${s.status}`),
    [],
    'from 2 s after the reset on, every request is served',
  );
  for (const path of paths) {
    t.comment(
      `${path}: first 200 sent after the freeze began came ${Math.round(
        firstServed(
          load.samples.filter((s) => s.sent >= frozenAt),
          path,
          frozenAt,
        ),
      )} ms after it`,
    );
  }
  const during = load.samples.filter((s) => s.sent >= frozenAt && s.sent < resetAt);
  t.comment(
    `during the freeze: ${during.length} answers, ${during.filter((s) => s.status === 200).length} served; statuses ${[...new Set(during.map((s) => s.status))]}`,
  );
  t.same(
    load.samples.filter((s) => s.status === 500 || s.status === 0).map((s) => `${s.path} ${s.status}`),
    [],
    'never a 500, never a request left without an answer for 10 s',
  );
  t.equal(server.child.exitCode, null, 'the server did not crash');
});

t.test('every backend of the instance terminated under load: served again within 1 s', async (t) => {
  const { database, proxy, server } = await proxiedService(t);
  const paths = ['/v1/products?count=none', '/v1', '/readyz'];
  const load = steadyLoad(server.url, [...paths, '/v1/products?count=none'], 20);
  await sleep(2_000);
  // The instance's backends: those connected through the proxy.
  const rows = await database.sql`
    select pg_terminate_backend(pid) as gone from pg_stat_activity
    where datname = ${database.name} and client_port = any(${proxy.upstreamPorts()}::int[])`;
  const terminatedAt = performance.now();
  t.ok(rows.length >= 2, `the pool's and the limiter's backends terminated (${rows.length})`);
  await sleep(3_000);
  await load.stop();
  for (const path of paths) {
    const ms = firstServed(
      load.samples.filter((s) => s.sent >= terminatedAt),
      path,
      terminatedAt,
    );
    t.comment(`${path}: first 200 sent after the termination came ${Math.round(ms)} ms after it`);
    t.ok(ms <= 1_000, `${path} is served again within 1 s (${Math.round(ms)} ms)`);
  }
  const after = load.samples.filter((s) => s.sent >= terminatedAt);
  t.comment(`after the termination: ${after.length} answers, ${after.filter((s) => s.status !== 200).length} not 200`);
  t.same(
    load.samples.filter((s) => s.status === 500 || s.status === 0).map((s) => `${s.path} ${s.status}`),
    [],
    'never a 500 or a hang',
  );
});
