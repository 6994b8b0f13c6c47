// What one request may carry, over a real socket: bodies stop at 4 KiB (413), and every link is followable.
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import t from 'tap';
import { seedTable } from '../db/seed.ts';
import { testDatabase } from './helpers/db.ts';
import { ADMIN_TOKEN } from './helpers/limiter.ts';
import { freePort, startServer, type ServerProcess } from './helpers/servers.ts';

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
function sendBody(server: ServerProcess, method: string, path: string, bytes: number, options: { chunked: boolean; headers?: Record<string, string> }): Promise<Sent> {
  const { hostname, port } = new URL(server.url);
  const headers: Record<string, string> = { host: `${hostname}:${port}`, 'content-type': 'application/json', ...options.headers };
  if (options.chunked) headers['transfer-encoding'] = 'chunked';
  else headers['content-length'] = String(bytes);
  const head = `${method} ${path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
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
      resolve({ status: status === undefined ? undefined : Number(status), contentType, body: json, ms: answeredMs ?? performance.now() - start, sentBytes });
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

async function boundedServer(t: { teardown(fn: () => unknown): void }): Promise<ServerProcess> {
  const db = await testDatabase(t);
  for (const table of ['products', 'orders', 'events'] as const) await seedTable(db.sql, table, 30);
  // Registrations are limited to 5 an hour per address; this test registers more from one.
  await db.sql`update rate_tiers set allowance = 1000000, concurrency = 100 where name in ('registration', 'anonymous')`;
  return startServer(t, await freePort(), { DATABASE_URL: db.url, ADMIN_TOKEN });
}

t.test('a body over 4 KiB is a 413 at once, read no further, with or without Content-Length', async (t) => {
  const server = await boundedServer(t);
  const pid = server.child.pid!;
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const routes: [string, string, Record<string, string>][] = [
    ['POST', '/v1/keys', {}],
    ['PUT', '/admin/tiers/huge', admin],
    ['PATCH', '/admin/keys/key_whatever', admin],
  ];
  // Warm up: the first requests of a process allocate code and pools that are not the body's.
  for (const [method, path, headers] of routes) await sendBody(server, method, path, 2 * MB, { chunked: true, headers });
  const before = rssMb(pid);
  const size = 80 * MB;
  for (const [method, path, headers] of routes) {
    for (const chunked of [false, true]) {
      const name = `${method} ${path} ${chunked ? 'chunked' : 'with Content-Length'}`;
      const sent = await sendBody(server, method, path, size, { chunked, headers });
      t.equal(sent.status, 413, name);
      t.equal(sent.contentType, 'application/problem+json');
      t.match(sent.body, {
        status: 413,
        code: 'payload_too_large',
        invalid_params: [{ name: 'body', reason: 'must be at most 4096 bytes' }],
      }, `${name}: a problem naming the limit`);
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
  const chunkedOver = await fetch(`${server.url}/v1/keys`, {
    method: 'POST',
    body: new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode(padded(4097))); controller.close(); } }),
    duplex: 'half',
  } as RequestInit);
  t.equal(chunkedOver.status, 413, '4097 bytes chunked are not either');
});
