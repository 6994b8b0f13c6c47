// `node bench/compression.ts <service origin>`: what the ETag and each compression level cost per chunk size, and what they save.
import { createHash } from 'node:crypto';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const origin = process.argv[2];
if (!origin) {
  console.error('Usage: node bench/compression.ts <origin of a running service, e.g. http://127.0.0.1:3000>');
  process.exit(2);
}

/**
 * Microseconds of this process's CPU per call of `fn`: the fastest of 15 runs of `calls` calls. CPU time, not
 * wall time, so that the time others hold the cores is not counted; the fastest, not the median: on a shared
 * machine a run is only ever slowed down by others (caches, a shared core), never sped up.
 */
function micros(fn: () => unknown, calls = 200): number {
  const runs: number[] = [];
  for (let run = 0; run < 15; run++) {
    const start = process.cpuUsage();
    for (let i = 0; i < calls; i++) fn();
    const used = process.cpuUsage(start);
    runs.push((used.user + used.system) / calls);
  }
  return Math.min(...runs);
}

const brotli = (quality: number) => (body: string) =>
  brotliCompressSync(body, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: quality,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
    },
  });
const codecs: [string, (body: string) => Buffer][] = [
  // The levels the service uses (lib/http/compression.ts: gzip 3, br 2) beside cheaper and dearer ones.
  ['gzip 1', (body) => gzipSync(body, { level: 1 })],
  ['gzip 3', (body) => gzipSync(body, { level: 3 })],
  ['gzip 4', (body) => gzipSync(body, { level: 4 })],
  ['gzip 6', (body) => gzipSync(body, { level: 6 })],
  ['br 1', brotli(1)],
  ['br 2', brotli(2)],
  ['br 4', brotli(4)],
  ['br 6', brotli(6)],
];

console.log(`| chunk | bytes | ETag µs | ${codecs.map(([name]) => `${name} µs / bytes`).join(' | ')} |`);
console.log(`|---|---:|---:|${codecs.map(() => '---:').join('|')}|`);
// Every body first: the timing below holds the event loop for seconds, past the server's keep-alive.
const sizes = [1, 2, 5, 10, 20, 50, 100];
const bodies = await Promise.all(sizes.map(async (items) => (await fetch(`${origin}/v1/products?limit=${items}&count=none`)).text()));
for (const [at, items] of sizes.entries()) {
  const body = bodies[at]!;
  const etag = micros(() => createHash('sha1').update(body).digest('base64url'), 2000);
  const cells = codecs.map(([, codec]) => `${micros(() => codec(body)).toFixed(0)} / ${codec(body).length}`);
  console.log(`| ${items} items | ${body.length} | ${etag.toFixed(1)} | ${cells.join(' | ')} |`);
}
