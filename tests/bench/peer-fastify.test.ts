// The bench's Fastify peer (bench/peer-fastify.ts) answers the chunk it is measured on with the service's
// items: the same items in the same order and JSON, the same links and cursor payload, its rate limit
// counted in Redis (docs/reference/bench.md, "The Fastify peer"): a Redis of the test's own, Debian's redis-server
// started on a free port (scripts/test-packages.sh installs it where it is missing).
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import t from 'tap';
import { findRedis } from '../../bench/redis.ts';
import { testApp } from '../helpers/app.ts';
import { cursorPayload, seedTrickyProducts, startBenchServer } from '../helpers/price-chunk.ts';
import { freePort, stopProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';

const CHUNK = '/v1/products?page-size=20&sort=priceCents';

/** Debian's redis-server on a free port, keeping nothing on disk, stopped at teardown: its URL once it answers. */
async function privateRedis(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const port = await freePort();
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir()],
    { stdio: 'ignore' },
  );
  t.teardown(() => stopProcess(server));
  const url = `redis://127.0.0.1:${port}`;
  await waitFor('the test’s Redis to answer', async () => (await findRedis(url)).found, { until: (found) => found, timeoutMs: 10_000 });
  return url;
}

t.test('the Fastify peer answers the chunk by price with the service’s items', async (t) => {
  const redisUrl = await privateRedis(t);
  const { database, json } = await testApp(t);
  await seedTrickyProducts(database.sql);

  const { origin, output, stop } = await startBenchServer(t, 'bench/peer-fastify.ts', { DATABASE_URL: database.url, REDIS_URL: redisUrl });

  const service = await json(CHUNK);
  const response = await fetch(`${origin}${CHUNK}`, { headers: { origin: 'https://page.example' } });
  t.equal(response.status, 200);
  t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
  t.equal(response.headers.get('access-control-allow-origin'), '*', 'CORS');
  const body = (await response.json()) as typeof service.body;
  t.equal(service.status, 200);
  t.equal(service.body.products.length, 20);
  t.same(Object.keys(body), Object.keys(service.body), 'the same fields, in the same order');
  t.equal(JSON.stringify(body.products), JSON.stringify(service.body.products), 'the same items, byte for byte');
  t.equal(body.pageSize, service.body.pageSize);
  t.equal(body._links.self.href.replace(origin, ''), service.body._links.self.href.replace('http://test.local', ''));
  t.strictSame(cursorPayload(body._links.next.href), cursorPayload(service.body._links.next.href), 'the same cursor payload');
  t.match(response.headers.get('link'), /^<[^>]+>; rel="self", <[^>]+>; rel="next"$/);

  // Counted in Redis, one request at a time: the limit is generous, the remaining count goes down by one.
  t.equal(response.headers.get('x-ratelimit-limit'), '1000000000');
  const remaining = Number(response.headers.get('x-ratelimit-remaining'));
  const again = await fetch(`${origin}${CHUNK}`);
  await again.arrayBuffer();
  t.equal(Number(again.headers.get('x-ratelimit-remaining')), remaining - 1, 'one count per request');

  // From a price on: the bench's rows where every request asks for another chunk. 30 rows at 100 to 102
  // cents: from 100, a next chunk; from 101, exactly one page and none; from 102, ten items.
  for (const [price, count, next] of [
    [100, 20, true],
    [101, 20, false],
    [102, 10, false],
  ] as const) {
    const from = `${CHUNK}&priceCents[gte]=${price}`;
    const served = await json(from);
    const peerAnswer = await fetch(`${origin}${from}`);
    t.equal(peerAnswer.status, 200);
    const peerBody = (await peerAnswer.json()) as typeof served.body;
    t.equal(served.status, 200);
    t.equal(served.body.products.length, count);
    t.equal(
      JSON.stringify(peerBody),
      JSON.stringify({ ...served.body, _links: peerBody._links }),
      `from ${price}: the same fields and items`,
    );
    t.equal(peerBody._links.self.href.replace(origin, ''), served.body._links.self.href.replace('http://test.local', ''));
    t.equal(Boolean(peerBody._links.next), next);
    t.equal(Boolean(served.body._links.next), next);
    if (next)
      t.strictSame(cursorPayload(peerBody._links.next.href), cursorPayload(served.body._links.next.href), 'the same cursor payload');
  }
  // Its query schema refuses another price filter value (Fastify's default validation drops unknown parameters).
  for (const bad of ['priceCents[gte]=', 'priceCents[gte]=1.5', 'priceCents[gte]=-1', 'priceCents[gte]=x']) {
    t.equal((await fetch(`${origin}${CHUNK}&${bad}`)).status, 400, `not ${bad}`);
  }
  t.equal((await fetch(`${origin}/v1/products?page-size=21&sort=priceCents`)).status, 400, 'nothing but that one chunk');

  // One log line per request, as pino's JSON: the process exits cleanly on SIGTERM, which flushes them.
  await stop();
  const lines = output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string; path?: string; status?: number });
  const logged = lines.filter((line) => line.msg === 'request completed' && line.path === '/v1/products');
  t.equal(logged.length, 2 + 3 + 4 + 1, 'one line per request to /v1/products');
});
