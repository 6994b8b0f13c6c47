// Graceful shutdown: on SIGTERM the server stops accepting, lets keep-alive clients move on, finishes
// in-flight requests and exits, by a deadline whatever happens; a second signal exits at once.
import type { ChildProcess } from 'node:child_process';
import { Agent, type IncomingHttpHeaders, request } from 'node:http';
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { lockWaiters, type TestDatabase, testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A GET over `agent`, so that connections are reused as a real keep-alive client reuses them. */
function get(agent: Agent, url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The exit of `child`; a process still running after 20 s counts as never exiting. */
function exitOf(child: ChildProcess): Promise<{ code: number | null; at: number }> {
  return new Promise((resolve) => {
    const never = setTimeout(() => resolve({ code: null, at: Infinity }), 20_000);
    child.once('exit', (code) => {
      clearTimeout(never);
      resolve({ code, at: performance.now() });
    });
  });
}

/**
 * Holds a lock the request needs, so that it is provably in flight inside the server until
 * `release` is called (or the test ends).
 */
async function holdProducts(t: { teardown(fn: () => unknown): void }, db: TestDatabase) {
  // A fresh allowance: the address has spent its own in the tests before.
  await db.sql`truncate paginated_collections.rate_windows`;
  const reserved = await db.sql.reserve();
  await reserved`begin`;
  await reserved`lock table demo.products in access exclusive mode`;
  let held = true;
  const release = async () => {
    if (!held) return;
    held = false;
    await reserved`commit`;
    reserved.release();
  };
  t.teardown(release);
  return {
    release,
    untilWaiting: () => lockWaiters(db.sql, db.name, 1),
  };
}

const db = await testDatabase(t);
for (const table of ['products', 'orders', 'events'] as const) await seedTable(db.sql, table, 50);

t.test('SIGTERM drains an in-flight request, refuses new ones, then exits 0', async (t) => {
  const { url, child, output } = await startServer(t, await freePort(), { DATABASE_URL: db.url });
  const exited = exitOf(child);
  const agent = new Agent({ keepAlive: true });
  t.teardown(() => agent.destroy());
  t.equal((await get(agent, `${url}/healthz`)).headers.connection, 'keep-alive', 'connections are reused while serving');

  const lock = await holdProducts(t, db);
  const inFlight = get(agent, `${url}/v1/products?limit=5`);
  await lock.untilWaiting();

  child.kill('SIGTERM');
  await waitFor('the server to log the signal', output, { until: (text) => text.includes('SIGTERM'), intervalMs: 25 });
  await t.rejects(fetch(`${url}/healthz`), 'a new connection is refused while draining');

  await lock.release();
  const res = await inFlight;
  t.equal(res.status, 200, 'the in-flight request completes');
  t.equal(JSON.parse(res.body).products.length, 5);
  t.equal(res.headers.connection, 'close', 'its answer tells the keep-alive client to go elsewhere');
  t.equal((await exited).code, 0, 'the process exits cleanly');
});

t.test('a keep-alive client sending back to back does not keep the process serving', async (t) => {
  const { url, child } = await startServer(t, await freePort(), { DATABASE_URL: db.url });
  const exited = exitOf(child);
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  t.teardown(() => agent.destroy());
  let signalled = false;
  const after = { answers: 0, closing: 0, refused: 0, reset: 0 };
  // Four connections, each sending its next request as soon as the last answer is in.
  const client = async () => {
    for (;;) {
      try {
        const res = await get(agent, `${url}/v1/products?limit=5`);
        if (signalled) {
          after.answers++;
          if (res.headers.connection === 'close') after.closing++;
        }
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (!signalled) throw error;
        if (code === 'ECONNREFUSED') return;
        // A request sent on a connection at the instant it was closed as idle: the keep-alive race.
        if (code !== 'ECONNRESET') throw error;
        after.reset++;
      }
    }
  };
  const clients = Promise.all([client(), client(), client(), client()]);
  await sleep(1000);
  const sent = performance.now();
  signalled = true;
  child.kill('SIGTERM');
  const { code, at } = await exited;
  child.kill('SIGKILL');
  await clients;
  t.equal(code, 0, 'exits cleanly');
  t.ok(at - sent < 5000, `exits well within the 10 s deadline (${Math.round(at - sent)} ms)`);
  // The signal reaches the server a moment after `signalled` is set: an answer begun by then went out
  // without the header, and its connection was closed once idle. So each connection has at most one
  // answer without Connection: close and one with it.
  t.ok(
    after.answers - after.closing <= 4,
    `at most one answer per connection without Connection: close (${after.answers - after.closing})`,
  );
  t.ok(after.answers <= 8, `the client moved on: ${after.answers} answers after the signal on 4 connections`);
  t.comment(`after SIGTERM: ${after.answers} answers, ${after.reset} reset by the idle close`);
});

/** A server on the test database with SHUTDOWN_TIMEOUT_MS `deadlineMs`, and one request held in flight in it. */
async function serverHoldingRequest(t: { teardown(fn: () => unknown): void }, deadlineMs: number) {
  const { child, url, output } = await startServer(t, await freePort(), { DATABASE_URL: db.url, SHUTDOWN_TIMEOUT_MS: String(deadlineMs) });
  const exited = exitOf(child);
  const lock = await holdProducts(t, db);
  const inFlight = fetch(`${url}/v1/products?limit=5`);
  inFlight.catch(() => {});
  await lock.untilWaiting();
  return { child, output, exited, inFlight };
}

t.test('a request held past the deadline: connections are cut and the process exits 1 by the deadline', async (t) => {
  const { child, output, exited, inFlight } = await serverHoldingRequest(t, 1500);
  const sent = performance.now();
  child.kill('SIGTERM');
  const { code, at } = await exited;
  t.equal(code, 1, 'a forced exit is not a clean one');
  t.ok(at - sent >= 1400, `not before the deadline (${Math.round(at - sent)} ms)`);
  t.ok(at - sent < 5000, 'and soon after it');
  t.match(output(), /Shutdown deadline of 1500 ms passed: closing 1 connection/);
  await t.rejects(inFlight, 'the request still held is cut');
});

t.test('a second SIGTERM exits at once; a copy within half a second (what npm forwards on Ctrl-C) counts once', async (t) => {
  const { child, output, exited } = await serverHoldingRequest(t, 60_000);
  // What npm does on Ctrl-C: the terminal's SIGINT and npm's forwarded copy arrive a moment apart.
  // The copy is sent once the first is handled, so that the two are not merged into one delivery.
  child.kill('SIGTERM');
  await waitFor('the server to log the signal', output, { until: (text) => text.includes('SIGTERM: finishing 1 request'), intervalMs: 25 });
  child.kill('SIGTERM');
  await sleep(1000);
  t.equal(child.exitCode, null, 'the repeat did not cut the drain short');
  const sent = performance.now();
  child.kill('SIGTERM');
  const { code, at } = await exited;
  t.equal(code, 1);
  t.ok(at - sent < 2000, `the second signal ends it at once (${Math.round(at - sent)} ms), not the 60 s deadline`);
  t.match(output(), /SIGTERM again: closing 1 connection/);
});

t.test('SHUTDOWN_DRAIN_MS: after SIGTERM /readyz fails at once, requests are served until the drain ends, then it exits 0', async (t) => {
  const drainMs = 1500;
  const { url, child, output } = await startServer(t, await freePort(), { DATABASE_URL: db.url, SHUTDOWN_DRAIN_MS: String(drainMs) });
  const exited = exitOf(child);
  await db.sql`truncate paginated_collections.rate_windows`;
  t.equal((await fetch(`${url}/readyz`)).status, 200);
  const sent = performance.now();
  child.kill('SIGTERM');
  await waitFor('the server to log the signal', output, { until: (text) => text.includes('SIGTERM: /readyz fails'), intervalMs: 10 });
  // New connections each: a balancer's checks and requests are accepted while draining.
  const agent = new Agent({ keepAlive: false });
  t.teardown(() => agent.destroy());
  const ready = await get(agent, `${url}/readyz`);
  t.equal(ready.status, 503, '/readyz fails');
  t.equal(JSON.parse(ready.body).code, 'unavailable');
  t.equal((await get(agent, `${url}/healthz`)).status, 200, '/healthz stays 200: the process is not broken');
  const reused = new Agent({ keepAlive: true });
  t.teardown(() => reused.destroy());
  const chunk = await get(reused, `${url}/v1/products?limit=5`);
  t.equal(chunk.status, 200, 'requests are still served');
  t.equal(chunk.headers.connection, 'keep-alive', 'without telling a keep-alive client to go: the balancer does that');
  const { code, at } = await exited;
  t.equal(code, 0);
  t.ok(at - sent >= drainMs, `it stops accepting only once the drain period is over (exit after ${Math.round(at - sent)} ms)`);
  t.ok(at - sent < drainMs + 5000, 'and exits soon after');
});
