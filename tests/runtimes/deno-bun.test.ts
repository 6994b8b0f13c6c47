// Deno and Bun: their entries (server.deno.ts, server.bun.ts) started on the runtimes npm installs count
// each source address on its own, and answer a chunk and a 429 as the Node entry does.
import http from 'node:http';
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { freePort } from '../helpers/processes.ts';
import { type Runtime, type ServerProcess, startServer } from '../helpers/servers.ts';

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** GET `path` from the local address `from` (a loopback address other than 127.0.0.1): what the server sees as the peer. */
function get(server: ServerProcess, path: string, from: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${server.url}${path}`, { localAddress: from, agent: false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers as Record<string, string>, body }));
    });
    request.on('error', reject);
  });
}

/**
 * What a client reads of an answer, with what may differ between servers and moments set aside: the
 * server's own origin in links, the clock (reset times, the seconds to wait), each request's own id, and the
 * headers each runtime adds of its own (date, connection handling).
 */
function shape(answer: Answer, server: ServerProcess): unknown {
  const local = (text: string) => text.replaceAll(server.url, 'ORIGIN');
  const timeless = (text: string) => text.replace(/\bt=\d+/, 't=T').replace(/retry after \d+ s/, 'retry after N s');
  const headers: Record<string, string> = {};
  for (const name of [
    'content-type',
    'content-length',
    'link',
    'cache-control',
    'vary',
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'ratelimit-policy',
    'ratelimit',
  ]) {
    if (answer.headers[name] !== undefined) headers[name] = timeless(local(answer.headers[name]));
  }
  headers['x-ratelimit-reset'] = answer.headers['x-ratelimit-reset'] === undefined ? 'absent' : 'present';
  headers['retry-after'] = answer.headers['retry-after'] === undefined ? 'absent' : 'present';
  // The tag of a body that holds the server's own origin differs with it.
  headers.etag = answer.headers.etag === undefined ? 'absent' : 'present';
  headers['x-request-id'] = answer.headers['x-request-id'] === undefined ? 'absent' : 'present';
  const body = JSON.parse(timeless(local(answer.body)));
  if (typeof body.requestId === 'string') body.requestId = 'ID';
  return { status: answer.status, headers, body };
}

t.test('Deno and Bun count each source address, and answer as Node does', async (t) => {
  const db = await testDatabase(t);
  await seedTable(db.sql, 'products', 200);
  await seedTable(db.sql, 'orders', 20);
  await seedTable(db.sql, 'events', 20);
  // A small anonymous allowance: three requests of one unit, then a 429.
  await setTier(db.sql, 'anonymous', { allowance: 3, windowSeconds: 600, concurrency: 10 });
  const runtimes: Runtime[] = ['node', 'deno', 'bun'];
  const servers = await Promise.all(runtimes.map(async (runtime) => startServer(t, await freePort(), { DATABASE_URL: db.url }, runtime)));

  const shapes = new Map<Runtime, unknown[]>();
  for (const [at, runtime] of runtimes.entries()) {
    const server = servers[at]!;
    await t.test(runtime, async (t) => {
      await db.sql`delete from paginated_collections.rate_windows`;
      // 20 products with count=none cost one unit (docs/reference/costs.md, "The rule").
      const path = '/v1/products?limit=2&count=none';
      const first = [];
      for (let i = 0; i < 4; i++) first.push(await get(server, path, '127.0.0.2'));
      t.same(
        first.map((answer) => answer.status),
        [200, 200, 200, 429],
        '127.0.0.2: its allowance of three, then a 429',
      );
      const other = await get(server, path, '127.0.0.3');
      t.equal(other.status, 200, '127.0.0.3 has an allowance of its own');
      t.equal(other.headers['x-ratelimit-remaining'], '2');
      const subjects = await db.sql`select subject, used from paginated_collections.rate_windows order by subject`;
      t.same(
        subjects.map((row) => [row.subject, row.used]),
        [
          ['ip:127.0.0.2', 3],
          ['ip:127.0.0.3', 1],
        ],
        'each address is its own subject: none is ip:unknown',
      );
      shapes.set(runtime, [shape(first[0]!, server), shape(first[3]!, server)]);
    });
  }
  for (const runtime of ['deno', 'bun'] as const) {
    t.same(shapes.get(runtime), shapes.get('node'), `a chunk and a 429 on ${runtime} look as on Node`);
  }
  t.equal(shapes.size, 3, 'every runtime answered');
});

t.test('on every runtime, the root and /v1 take the peer from the entry: their links honour TRUST_PROXY', async (t) => {
  const db = await testDatabase(t);
  const runtimes: Runtime[] = ['node', 'deno', 'bun'];
  const servers = await Promise.all(
    runtimes.map(async (runtime) => startServer(t, await freePort(), { DATABASE_URL: db.url, TRUST_PROXY: '127.0.0.2' }, runtime)),
  );
  const forwarded = { 'x-forwarded-host': 'api.example', 'x-forwarded-proto': 'https' };
  for (const [at, runtime] of runtimes.entries()) {
    const server = servers[at]!;
    for (const path of ['/', '/v1']) {
      const viaProxy = await getWith(server, path, '127.0.0.2', forwarded);
      t.equal(
        JSON.parse(viaProxy.body)._links.self.href.startsWith('https://api.example/'),
        true,
        `${runtime} ${path}: from the proxy, its host`,
      );
      const direct = await getWith(server, path, '127.0.0.3', forwarded);
      t.equal(JSON.parse(direct.body)._links.self.href.startsWith(server.url), true, `${runtime} ${path}: from anyone else, its own`);
    }
  }
});

/** GET `path` from the local address `from` with `headers`. */
function getWith(server: ServerProcess, path: string, from: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${server.url}${path}`, { localAddress: from, agent: false, headers }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers as Record<string, string>, body }));
    });
    request.on('error', reject);
  });
}
