// Compression over a listening server: gzip or br by Accept-Encoding above the threshold, Vary: Accept-Encoding, the same body.
import { request } from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import t from 'tap';
import { COMPRESSION_THRESHOLD } from '../../lib/http/compression.ts';
import { testApp } from '../helpers/app.ts';
import { listening } from '../helpers/listening.ts';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** A GET whose body comes back as sent (fetch would decode it). */
function raw(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Raw> {
  return new Promise((resolve, reject) => {
    request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    })
      .on('error', reject)
      .end();
  });
}

t.test('a 100-item chunk is sent as br or gzip as the client prefers, and decodes to the same JSON', async (t) => {
  const api = await testApp(t, { seed: { products: 120 } });
  const origin = await listening(t, api.app);
  const url = `${origin}/v1/products?limit=100`;
  const plain = await raw(url);
  t.equal(plain.headers['content-encoding'], undefined, 'no Accept-Encoding: as it is');
  t.equal(plain.headers.vary, 'Accept-Encoding', 'but it varies by Accept-Encoding');
  t.ok(plain.body.length > 10_000, `${plain.body.length} bytes`);
  const decoders: Record<string, (body: Buffer) => Buffer> = { gzip: gunzipSync, br: brotliDecompressSync };
  for (const [accept, expected] of [
    ['gzip', 'gzip'],
    ['br', 'br'],
    ['gzip, deflate, br, zstd', 'br'],
    ['br;q=0.5, gzip', 'gzip'],
    ['*', 'br'],
    ['deflate', undefined],
    ['identity', undefined],
    ['gzip;q=0, br;q=0', undefined],
  ] as const) {
    const res = await raw(url, { 'accept-encoding': accept });
    t.equal(res.status, 200, accept);
    t.equal(res.headers['content-encoding'], expected, accept);
    t.equal(res.headers.vary, 'Accept-Encoding', accept);
    t.equal(res.headers.etag, plain.headers.etag, `${accept}: one weak tag for every encoding`);
    const body = expected ? decoders[expected]!(res.body) : res.body;
    t.same(JSON.parse(body.toString()), JSON.parse(plain.body.toString()), `${accept}: the same chunk`);
    if (expected) t.ok(res.body.length < plain.body.length / 3, `${accept}: ${res.body.length} bytes`);
  }
});

t.test('small bodies, HEAD and 304s are sent as they are', async (t) => {
  const api = await testApp(t, { seed: { products: 120 } });
  const origin = await listening(t, api.app);
  const small = await raw(`${origin}/v1/products?limit=1`, { 'accept-encoding': 'gzip, br' });
  t.ok(small.body.length < COMPRESSION_THRESHOLD, `${small.body.length} bytes, under the threshold`);
  t.equal(small.headers['content-encoding'], undefined);
  t.equal(small.headers.vary, undefined, 'never compressed, so it does not vary');
  const head = await raw(`${origin}/v1/products?limit=100`, { 'accept-encoding': 'gzip' }, 'HEAD');
  t.equal(head.status, 200);
  t.equal(head.headers['content-encoding'], undefined);
  t.equal(head.body.length, 0);
  const { etag } = (await raw(`${origin}/v1/products?limit=100`)).headers;
  const notModified = await raw(`${origin}/v1/products?limit=100`, { 'accept-encoding': 'gzip', 'if-none-match': String(etag) });
  t.equal(notModified.status, 304);
  t.equal(notModified.headers['content-encoding'], undefined);
  t.equal(notModified.headers.vary, 'Accept-Encoding', 'a 304 repeats Vary');
  t.equal(notModified.body.length, 0);
});

t.test('a chunk asked for again is sent as compressed before, and a changed chunk compressed anew', async (t) => {
  const api = await testApp(t, { seed: { products: 120 } });
  const origin = await listening(t, api.app);
  const url = `${origin}/v1/products?limit=100`;
  const decoders: Record<string, (body: Buffer) => Buffer> = { gzip: gunzipSync, br: brotliDecompressSync };
  for (const encoding of ['gzip', 'br']) {
    const first = await raw(url, { 'accept-encoding': encoding });
    const again = await raw(url, { 'accept-encoding': encoding });
    t.equal(again.headers.etag, first.headers.etag, `${encoding}: the same chunk`);
    t.same(again.body, first.body, `${encoding}: the same bytes`);
  }
  // Kept by ETag, not by URL: once a product changes, the same URL is another chunk, never the kept one.
  await api.database.sql`update demo.products set name = 'Renamed' where id = 3`;
  for (const encoding of ['gzip', 'br']) {
    const changed = await raw(url, { 'accept-encoding': encoding });
    const plain = await raw(url);
    t.equal(changed.headers.etag, plain.headers.etag, `${encoding}: the tag of the changed chunk`);
    const json = JSON.parse(decoders[encoding]!(changed.body).toString()) as { products: { id: number; name: string }[] };
    t.equal(json.products.find((product) => product.id === 3)?.name, 'Renamed', `${encoding}: the change is in it`);
  }
});
