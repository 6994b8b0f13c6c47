// `node bench/observe-cost.ts [requests]`: the CPU a request's log line and metrics cost, in this process,
// without a database or a socket: GET /healthz through the app (app.request), with the request log at
// info or silent, and metrics on (ADMIN_TOKEN) or off, in rotation. The lines go through pino's
// asynchronous destination, as the service writes stdout, into a pipe that `cat` drains, as a container
// runtime or a log shipper reads the service's stdout. Not part of the tests.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { openDatabase } from '../db/client.ts';
import { demoRegistry } from '../demo/collections.ts';
import { createLogger } from '../lib/http/logger.ts';
import { buildApp } from '../lib/service/app.ts';
import { parseConfig } from '../lib/service/config.ts';

const requests = Number(process.argv[2] ?? 50_000);
const ROUNDS = 7;

// Never connected: /healthz asks nothing of the database, and postgres.js connects on the first query.
const database = openDatabase('postgres://nobody@127.0.0.1:1/none', { max: 1 });

// A named pipe with a reader: writes to it cost what writes to a piped stdout cost.
const dir = mkdtempSync(path.join(tmpdir(), 'observe-cost-'));
const fifo = path.join(dir, 'log');
execFileSync('mkfifo', [fifo]);
const reader = spawn('sh', ['-c', `cat "${fifo}" > /dev/null`], { stdio: 'ignore' });
// Opened here, synchronously: it waits for the reader, so every line measured is really written.
const destination = pino.destination({ dest: openSync(fifo, 'w'), sync: false });

function app(level: 'info' | 'silent', metrics: boolean) {
  const logger = createLogger({ level, destination });
  const config = parseConfig(metrics ? { ADMIN_TOKEN: 'x'.repeat(32) } : {});
  return buildApp({ database, config, registry: demoRegistry(), cursorSecret: 'x'.repeat(32), logger }).request;
}

const variants = [
  { name: 'LOG_LEVEL=silent, no metrics', request: app('silent', false) },
  { name: 'LOG_LEVEL=silent, metrics', request: app('silent', true) },
  { name: 'LOG_LEVEL=info, no metrics', request: app('info', false) },
  { name: 'LOG_LEVEL=info, metrics', request: app('info', true) },
];

/** CPU microseconds (user + system) per request over `n` requests, one at a time. */
async function cpuPerRequest(request: (typeof variants)[number]['request'], n: number): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) await (await request('http://bench.local/healthz')).arrayBuffer();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

for (const variant of variants) await cpuPerRequest(variant.request, requests / 5); // warm-up: JIT, caches
const results = new Map<string, number[]>(variants.map((variant) => [variant.name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const variant of variants) results.get(variant.name)!.push(await cpuPerRequest(variant.request, requests));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const base = median(results.get('LOG_LEVEL=silent, no metrics')!);
console.log(`GET /healthz through the app, ${requests} requests × ${ROUNDS} rounds in rotation; median CPU µs per request:\n`);
console.log('| variant | µs/req | range | added to silent, no metrics |');
console.log('| --- | ---: | ---: | ---: |');
for (const [name, xs] of results) {
  const m = median(xs);
  console.log(`| ${name} | ${m.toFixed(2)} | ${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)} | ${(m - base).toFixed(2)} |`);
}
await database.close();
destination.flushSync();
destination.end();
await new Promise((resolve) => reader.once('exit', resolve));
rmSync(dir, { recursive: true, force: true });
