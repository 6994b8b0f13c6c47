// Behind HAProxy, three instances restarted one after another under load: with a drain period longer than
// HAProxy takes to mark an instance down, no request fails (docs/how-to/load-balancer.md, "Stopping and draining").
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { testDatabase } from '../helpers/db.ts';
import { startHaproxy } from '../helpers/haproxy.ts';
import { setTier } from '../helpers/limiter.ts';
import { freePort, stopProcess } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';
import { sleep } from '../helpers/wait.ts';

// HAProxy checks every 200 ms and marks an instance down after 2 failed checks: within about 0.4–0.6 s of
// its /readyz failing. The drain period leaves it well over twice that.
const CHECK = { interMs: 200, fall: 2, rise: 2 };
const DRAIN_MS = 1500;
const CLIENTS = 4;

const db = await testDatabase(t);
await seedTable(db.sql, 'products', 200);
// Every request comes from HAProxy's address: an allowance no rolling restart spends.
await setTier(db.sql, 'anonymous', { allowance: 1_000_000_000, windowSeconds: 60, concurrency: 1000 });

interface Failure {
  readonly at: number;
  readonly what: string;
}

/** Clients sending back to back through the balancer until `stop()`; every answer but a 200 is a failure. */
function load(url: string) {
  let running = true;
  let served = 0;
  /** Requests answered 200 that took over a second: held by HAProxy retrying an instance that was gone. */
  let slow = 0;
  const failures: Failure[] = [];
  const started = performance.now();
  const client = async (n: number) => {
    for (let i = 0; running; i++) {
      const sent = performance.now();
      try {
        const res = await fetch(`${url}/v1/products?limit=5&count=none&offset=${(n * 50 + i) % 190}`);
        const body = await res.text();
        if (res.status === 200) {
          served++;
          if (performance.now() - sent > 1000) slow++;
        } else failures.push({ at: performance.now() - started, what: `${res.status} ${body.replace(/\s+/g, ' ').slice(0, 120)}` });
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause;
        failures.push({ at: performance.now() - started, what: `${(error as Error).message} ${cause?.code ?? ''}` });
      }
    }
  };
  const clients = Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n)));
  return {
    async stop() {
      running = false;
      await clients;
      return { served, slow, failures };
    },
  };
}

/**
 * Three instances with SHUTDOWN_DRAIN_MS `drainMs` behind HAProxy; under load, each in turn gets SIGTERM,
 * exits, and is started again on its port, and the next waits until HAProxy has the new one up.
 */
async function rollingRestart(t: { teardown(fn: () => unknown): void }, drainMs: number) {
  const env = { DATABASE_URL: db.url, SHUTDOWN_DRAIN_MS: String(drainMs) };
  const ports = [await freePort(), await freePort(), await freePort()];
  const instances: ServerProcess[] = await Promise.all(ports.map((port) => startServer(t, port, env)));
  const haproxy = await startHaproxy(t, { servers: ports, ...CHECK });
  for (const name of ['s1', 's2', 's3']) await haproxy.until(name, 'UP');

  const traffic = load(haproxy.url);
  await sleep(500);
  const exits: (number | null)[] = [];
  for (const [i, port] of ports.entries()) {
    exits.push(await stopProcess(instances[i]!.child, { graceMs: drainMs + 10_000 }));
    instances[i] = await startServer(t, port, env);
    await haproxy.until(`s${i + 1}`, 'UP');
  }
  await sleep(500);
  const result = await traffic.stop();
  await Promise.all([haproxy.stop(), ...instances.map((instance) => stopProcess(instance.child))]);
  return { ...result, exits };
}

t.test('rolling restart behind HAProxy: no drain period (before), then a drain period (after)', async (t) => {
  const before = await rollingRestart(t, 0);
  t.comment(
    `without a drain period: ${before.failures.length} failed of ${before.served + before.failures.length} requests in one rolling restart of 3 instances; ${before.slow} more took over 1 s`,
  );
  for (const failure of before.failures.slice(0, 10)) t.comment(`  at ${Math.round(failure.at)} ms: ${failure.what}`);
  t.same(before.exits, [0, 0, 0], 'each instance exits 0');

  const after = await rollingRestart(t, DRAIN_MS);
  t.comment(
    `with SHUTDOWN_DRAIN_MS=${DRAIN_MS}: ${after.failures.length} failed of ${after.served + after.failures.length} requests in one rolling restart of 3 instances; ${after.slow} took over 1 s`,
  );
  t.same(after.failures, [], 'no request fails');
  t.ok(after.served > 100, `the load kept flowing (${after.served} requests served)`);
  t.same(after.exits, [0, 0, 0], 'each instance exits 0');
});
