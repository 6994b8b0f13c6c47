// What one request may carry, over a real socket: bodies stop at 4 KiB (413), and every link is followable.
import { readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { connect } from 'node:net';
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { MAX_IN_VALUES } from '../../lib/pagination/filters.ts';
import { SERVICE_LINKS } from '../../lib/pagination/links.ts';
import { encodeQueryComponent, MAX_LINK_QUERY_LENGTH } from '../../lib/pagination/params.ts';
import { POSITION_PARAMS } from '../../lib/pagination/variant-params.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';

const MB = 1024 * 1024;

/** The resident set of a process, in MB. */
function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

interface Sent {
  readonly status: number | undefined;
  readonly contentType: string | undefined;
  readonly body: any;
  readonly ms: number;
  /** Bytes the client managed to write before the server closed the connection or answered. */
  readonly sentBytes: number;
}

/**
 * Sends a body of `bytes` over a raw socket the way a hostile client would: it keeps writing after the
 * answer, until the whole body is out or the server closes the connection. With `chunked`, no
 * Content-Length. A raw socket reads the answer as it arrives, whatever happens to the writes.
 */
function sendBody(
  server: ServerProcess,
  method: string,
  path: string,
  bytes: number,
  options: { chunked: boolean; headers?: Record<string, string> },
): Promise<Sent> {
  const { hostname, port } = new URL(server.url);
  const headers: Record<string, string> = { host: `${hostname}:${port}`, 'content-type': 'application/json', ...options.headers };
  if (options.chunked) headers['transfer-encoding'] = 'chunked';
  else headers['content-length'] = String(bytes);
  const head = `${method} ${path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  const piece = Buffer.alloc(64 * 1024, 'a');
  piece[0] = 0x7b; // "{": not JSON either way
  const chunk = options.chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
  const start = performance.now();
  return new Promise((resolve) => {
    let sentBytes = 0;
    let received = '';
    let answeredMs: number | undefined;
    const socket = connect(Number(port), hostname);
    function finish(): void {
      socket.destroy();
      const [head = '', body = ''] = received.split('\r\n\r\n');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head)?.[1];
      const contentType = /^content-type: *(.*)$/im.exec(head)?.[1]?.trim();
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = body;
      }
      resolve({
        status: status === undefined ? undefined : Number(status),
        contentType,
        body: json,
        ms: answeredMs ?? performance.now() - start,
        sentBytes,
      });
    }
    function pump(): void {
      while (sentBytes < bytes && !socket.destroyed) {
        sentBytes += piece.length;
        if (!socket.write(chunk)) {
          socket.once('drain', pump);
          return;
        }
      }
      if (sentBytes >= bytes && options.chunked) socket.write('0\r\n\r\n');
    }
    socket.on('data', (data: Buffer) => {
      received += data.toString();
      answeredMs ??= performance.now() - start;
    });
    socket.on('error', () => {}); // the server closing on us while we write: expected
    socket.on('close', finish);
    // A hostile client never stops by itself; give up after 20 s.
    setTimeout(finish, 20_000).unref();
    socket.write(head);
    pump();
  });
}

async function boundedServer(t: { teardown(fn: () => unknown): void }, rows = 30): Promise<ServerProcess> {
  const db = await testDatabase(t);
  for (const table of ['products', 'orders', 'events'] as const) await seedTable(db.sql, table, rows);
  // Registrations are limited to 5 an hour per address; this test registers more from one.
  await db.sql`update paginated_collections.rate_tiers set allowance = 1000000, concurrency = 100 where name in ('registration', 'anonymous')`;
  return startServer(t, await freePort(), { DATABASE_URL: db.url, ADMIN_TOKEN });
}

t.test(
  "a body over its route's limit (4 KiB; 64 KiB for the operator's keys) is a 413 at once, read no further, with or without Content-Length",
  async (t) => {
    const server = await boundedServer(t);
    const pid = server.child.pid!;
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const routes: [string, string, Record<string, string>, number][] = [
      ['POST', '/v1/keys', {}, 4096],
      ['PUT', '/admin/tiers/huge', admin, 4096],
      ['PATCH', '/admin/keys/key_whatever', admin, 65536],
    ];
    // Warm up: the first requests of a process allocate code and pools that are not the body's.
    for (const [method, path, headers] of routes) await sendBody(server, method, path, 2 * MB, { chunked: true, headers });
    const before = rssMb(pid);
    const size = 80 * MB;
    for (const [method, path, headers, limit] of routes) {
      for (const chunked of [false, true]) {
        const name = `${method} ${path} ${chunked ? 'chunked' : 'with Content-Length'}`;
        const sent = await sendBody(server, method, path, size, { chunked, headers });
        t.equal(sent.status, 413, name);
        t.equal(sent.contentType, 'application/problem+json');
        t.match(
          sent.body,
          {
            status: 413,
            code: 'payload_too_large',
            invalid_params: [{ name: 'body', reason: `must be at most ${limit} bytes` }],
          },
          `${name}: a problem naming the limit`,
        );
        t.ok(sent.ms < 10_000, `${name}: answered in ${Math.round(sent.ms)} ms`);
        t.ok(sent.sentBytes < size / 4, `${name}: the server stopped reading after ${(sent.sentBytes / MB).toFixed(1)} MB of ${size / MB}`);
      }
    }
    const growth = rssMb(pid) - before;
    t.ok(growth < 8, `the server's RSS grew by ${growth.toFixed(1)} MB over six 80 MB bodies`);
    t.comment(`RSS ${before.toFixed(1)} MB before, ${(before + growth).toFixed(1)} MB after`);

    // Still serving, and the limit is exact: 4096 bytes are read, 4097 are not.
    t.equal((await fetch(`${server.url}/healthz`)).status, 200);
    const issued = await fetch(`${server.url}/v1/keys`, { method: 'POST', body: JSON.stringify({ name: 'after the storm' }) });
    t.equal(issued.status, 201);
    const padded = (bytes: number) => `{"name": "x"}${' '.repeat(bytes - 13)}`;
    t.equal((await fetch(`${server.url}/v1/keys`, { method: 'POST', body: padded(4096) })).status, 201, '4096 bytes are taken');
    const over = await fetch(`${server.url}/v1/keys`, { method: 'POST', body: padded(4097) });
    t.equal(over.status, 413, '4097 bytes are not');
    t.equal(over.headers.get('content-type'), 'application/problem+json');
    // A stream body: sent chunked, with no Content-Length to judge it by.
    const postChunked = (body: string) =>
      fetch(`${server.url}/v1/keys`, {
        method: 'POST',
        body: new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(body));
            controller.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
    t.equal((await postChunked(padded(4097))).status, 413, '4097 bytes chunked are not either');
    const chunkedAtLimit = await postChunked(padded(4096));
    t.equal(chunkedAtLimit.status, 201, '4096 bytes chunked are taken');
    t.equal((await chunkedAtLimit.json()).name, 'x');
  },
);

/** Pads an `in` list of real values with made-up ones up to `max` values, then grows the last pad. */
function inList(real: readonly string[], count: number): string[] {
  return [...real, ...Array.from({ length: count - real.length }, (_, i) => `p${String(i).padStart(2, '0')}`)];
}

/**
 * The largest query the bounds allow: `params` with the values of `inName` padded so that the filters,
 * sort and count (every parameter but the variant's own), written with only characters links leave as
 * they are, are exactly MAX_LINK_QUERY_LENGTH long.
 */
function largest(params: [string, string][], inName: string): string {
  const text = (which: [string, string][]) => which.map(([k, v]) => `${k}=${v}`).join('&');
  // As links write them: "[" and "]" of a name percent-encoded, three characters each.
  const linkText = (which: [string, string][]) => which.map(([k, v]) => `${encodeQueryComponent(k)}=${encodeQueryComponent(v)}`).join('&');
  const carried = () => params.filter(([k]) => !POSITION_PARAMS.has(k));
  const missing = MAX_LINK_QUERY_LENGTH - linkText(carried()).length;
  if (missing < 0) throw new Error(`the fixed parameters alone are too long: ${linkText(carried()).length}`);
  params.find(([k]) => k === inName)![1] += 'x'.repeat(missing); // the last made-up value grows
  t.equal(linkText(carried()).length, MAX_LINK_QUERY_LENGTH);
  return text(params);
}

/** GET over a real socket with node:http, which (unlike fetch) lets any header through as it is. */
function rawGet(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpGet(url, { headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (data: Buffer) => (body += data.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
  });
}

/** `<href>; rel="name"` pairs of a Link header. */
function linkHeaderHrefs(header: string): Map<string, string> {
  return new Map([...header.matchAll(/<([^>]*)>; rel="([^"]+)"/g)].map((m) => [m[2]!, m[1]!]));
}

t.test('every link of the largest request the bounds allow can be followed, and the Link header stays under 8 KiB', async (t) => {
  const server = await boundedServer(t, 30);
  const categories = ['books', 'garden', 'kitchen', 'music', 'outdoor', 'tools', 'toys', 'games'];
  const statuses = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'];
  const types = ['login', 'logout', 'purchase', 'refund', 'signup', 'error'];
  const cases: [string, string][] = [
    [
      'products offset',
      largest(
        [
          ['limit', '2'],
          ['offset', '2'],
          ['sort', '-priceCents,name'],
          ['count', 'exact'],
          ['priceCents[gte]', '100'],
          ['category[in]', inList(categories, MAX_IN_VALUES).join(',')],
        ],
        'category[in]',
      ),
    ],
    [
      'products page',
      largest(
        [
          ['page', '1'],
          ['page-size', '2'],
          ['sort', '-priceCents,name'],
          ['count', 'exact'],
          ['priceCents[gte]', '100'],
          ['category[in]', inList(categories, MAX_IN_VALUES).join(',')],
        ],
        'category[in]',
      ),
    ],
    [
      'products cursor',
      largest(
        [
          ['page-size', '2'],
          ['sort', '-priceCents,name'],
          ['priceCents[gte]', '100'],
          ['category[in]', inList(categories, MAX_IN_VALUES).join(',')],
        ],
        'category[in]',
      ),
    ],
    [
      'orders cursor',
      largest(
        [
          ['page-size', '2'],
          ['sort', '-totalCents'],
          ['totalCents[gte]', '1'],
          ['status[in]', inList(statuses, MAX_IN_VALUES).join(',')],
        ],
        'status[in]',
      ),
    ],
    [
      'events time, older',
      largest(
        [
          ['page-size', '2'],
          ['before', '2999-12-31T23:59:59.999999Z'],
          ['type[in]', inList(types, MAX_IN_VALUES).join(',')],
        ],
        'type[in]',
      ),
    ],
    [
      'events time, newer',
      largest(
        [
          ['page-size', '2'],
          ['after', '1970-01-01T00:00:00.000000Z'],
          ['type[in]', inList(types, MAX_IN_VALUES).join(',')],
        ],
        'type[in]',
      ),
    ],
    [
      'events cursor',
      largest(
        [
          ['page-size', '2'],
          ['since_id', '0'],
          ['type[in]', inList(types, MAX_IN_VALUES).join(',')],
        ],
        'type[in]',
      ),
    ],
    // Past the newest item: no next, a poll link instead.
    [
      'events time, newest',
      largest(
        [
          ['page-size', '2'],
          ['after', '2999-12-31T23:59:59.999999%2B14:00'],
          ['type[in]', inList(types, MAX_IN_VALUES).join(',')],
        ],
        'type[in]',
      ),
    ],
  ];
  const collectionOf = (name: string) => name.split(' ')[0]!;
  let longestLink = 0;
  let longestHeader = 0;
  for (const [name, query] of cases) {
    const first = await rawGet(`${server.url}/v1/${collectionOf(name)}?${query}`);
    t.equal(first.status, 200, `${name}: ${first.body.slice(0, 200)}`);
    // Follow every link of the first chunk, and of the chunk its next link leads to (cursor links).
    const queue: [string, typeof first][] = [['first request', first]];
    const followed = new Set<string>();
    for (let depth = 0; queue.length > 0 && depth < 2; depth++) {
      for (const [, res] of queue.splice(0)) {
        const header = String(res.headers.link ?? '');
        longestHeader = Math.max(longestHeader, header.length);
        t.ok(header.length < 8192, `${name}: Link header of ${header.length} characters`);
        const body = JSON.parse(res.body);
        const links = new Map(Object.entries(body._links as Record<string, { href: string }>).map(([rel, { href }]) => [rel, href]));
        t.ok(header.endsWith(`, ${SERVICE_LINKS}`), `${name}: the Link header ends with the service's description and docs`);
        t.same(
          linkHeaderHrefs(header.slice(0, -`, ${SERVICE_LINKS}`.length)),
          links,
          `${name}: before them, the Link header carries the body's links`,
        );
        t.ok(links.has(name.endsWith('newest') ? 'poll' : 'next'), `${name}: there is a next chunk, or a poll link, to follow`);
        // The whole Link header, echoed back as a request header, is still a request Node and proxies take.
        const echo = await rawGet(`${server.url}/v1/${collectionOf(name)}?page-size=1`, { link: header });
        t.equal(echo.status, 200, `${name}: the Link header echoed as a request header`);
        for (const [rel, href] of links) {
          longestLink = Math.max(longestLink, href.length);
          if (followed.has(href)) continue;
          followed.add(href);
          const next = await rawGet(href);
          t.equal(next.status, 200, `${name}: ${rel} (${href.length} characters) can be followed: ${next.body.slice(0, 200)}`);
          if (rel === 'next' && depth === 0) queue.push([rel, next]);
        }
      }
    }
  }
  t.comment(`longest link ${longestLink} characters, longest Link header ${longestHeader} characters`);

  // One character more is a 400 that names the longest parameter and says the limit.
  const over = await rawGet(`${server.url}/v1/products?${cases[0]![1]}x`);
  t.equal(over.status, 400);
  t.equal(over.headers['content-type'], 'application/problem+json');
  const problem = JSON.parse(over.body);
  t.equal(problem.code, 'invalid_parameter');
  t.equal(problem.invalid_params[0].name, 'category[in]');
  t.match(problem.invalid_params[0].reason, /1025 characters long; at most 1024 are allowed/);

  // The origin starts every link: a Host longer than any host name is refused, one of 253 is taken.
  const port = new URL(server.url).port;
  const longHost = await rawGet(`${server.url}/v1/products?limit=1`, { host: `${'h'.repeat(300)}:${port}` });
  t.equal(longHost.status, 400);
  t.equal(JSON.parse(longHost.body).invalid_params[0].name, 'Host');
  const longestName = `${'h'.repeat(63)}.${'h'.repeat(63)}.${'h'.repeat(63)}.${'h'.repeat(61)}`;
  const named = await rawGet(`${server.url}/v1/products?limit=1`, { host: `${longestName}:${port}` });
  t.equal(named.status, 200, 'a 253-character host name');
  t.equal(JSON.parse(named.body)._links.self.href, `http://${longestName}:${port}/v1/products?limit=1&offset=0`);
});
