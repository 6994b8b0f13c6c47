// The bench's Fastify peer (docs/reference/bench.md, "The Fastify peer"): what a team would build by hand instead
// of the service to answer its rate-limited chunk `GET /v1/products?page-size=20&sort=priceCents`, on the
// usual stack for it: Fastify 5, @fastify/rate-limit with its counters in Redis (ioredis, as the plugin
// documents), @fastify/cors, one prepared keyset select through postgres.js, a response schema (serialised
// by fast-json-stringify) and Fastify's own pino logger writing one line per request. It answers the same
// items as the floor and the service, with the same links and `next` cursor payload, and the chunk from a
// price on (`&priceCents[gte]=N`), the bench's rows where every request asks for another chunk.
// Environment: DATABASE_URL, REDIS_URL (default redis://127.0.0.1:6379), PORT, LOG_LEVEL (default info).
import { randomBytes } from 'node:crypto';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import pino from 'pino';
import postgres from 'postgres';
import { nextCursor, type ProductRow, productItem } from './price-chunk.ts';

const PAGE_SIZE = 20;
// A generous limit, as the bench raises the service's anonymous tier: no request of a row is ever a 429.
const ALLOWANCE = 1_000_000_000;
const WINDOW_MS = 60_000;

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('The Fastify peer needs DATABASE_URL');
const port = Number(process.env.PORT ?? 4300);
const level = process.env.LOG_LEVEL ?? 'info';
const cursorSecret = randomBytes(32).toString('hex');

// One pool of ten connections, as many as the service's data pool. int8 as JS numbers, as the service reads
// them; timestamptz as PostgreSQL's text in UTC, formatted below, so no microsecond is lost to a JS Date.
const sql = postgres(databaseUrl, {
  max: 10,
  types: {
    int8: { to: 20, from: [20], serialize: (n: number) => String(n), parse: (text: string) => Number(text) },
    timestamptz: { to: 1184, from: [1184], serialize: (text: string) => text, parse: (text: string) => text },
  },
  connection: { application_name: 'bench-fastify-peer', TimeZone: 'UTC' },
  idle_timeout: 30,
  onnotice: () => {},
});

// The plugin's advice for ioredis: a short connect timeout and one retry, so that a request fails rather
// than waits while Redis is away.
const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379', {
  connectionName: 'bench-fastify-peer',
  connectTimeout: 500,
  maxRetriesPerRequest: 1,
});

// Fastify's logger (pino) on stdout, as the service logs: asynchronous, lines written 12 KB at a time.
// Fastify's own request logging writes two lines a request (received, completed): it is off, and the
// onResponse hook below writes one.
const app = Fastify({
  logger: { level, stream: pino.destination({ dest: 1, sync: false, minLength: 12 * 1024 }) },
  disableRequestLogging: true,
});

await app.register(cors, {
  origin: '*',
  exposedHeaders: ['Link', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After'],
});
await app.register(rateLimit, { max: ALLOWANCE, timeWindow: WINDOW_MS, redis, nameSpace: 'bench-fastify-peer-' });

app.addHook('onResponse', async (request, reply) => {
  request.log.info(
    { method: request.method, path: request.routeOptions.url, status: reply.statusCode, durationMs: reply.elapsedTime },
    'request completed',
  );
});

interface ChunkQuery {
  'page-size': number;
  sort: 'priceCents';
  'priceCents[gte]'?: number;
}

const link = { type: 'object', properties: { href: { type: 'string' } }, required: ['href'] } as const;

app.get('/readyz', { config: { rateLimit: false } }, async () => 'ready');

app.get<{ Querystring: ChunkQuery }>(
  '/v1/products',
  {
    schema: {
      querystring: {
        type: 'object',
        properties: {
          'page-size': { type: 'integer', enum: [PAGE_SIZE], default: PAGE_SIZE },
          sort: { type: 'string', enum: ['priceCents'] },
          'priceCents[gte]': { type: 'integer', minimum: 0 },
        },
        required: ['sort'],
      },
      response: {
        200: {
          type: 'object',
          properties: {
            pageSize: { type: 'integer' },
            products: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  id: { type: 'integer' },
                  name: { type: 'string' },
                  category: { type: 'string' },
                  priceCents: { type: 'integer' },
                  createdAt: { type: 'string' },
                },
                required: ['id', 'name', 'category', 'priceCents', 'createdAt'],
              },
            },
            _links: { type: 'object', properties: { self: link, next: link }, required: ['self'] },
          },
          required: ['pageSize', 'products', '_links'],
        },
      },
    },
  },
  async (request, reply) => {
    const from = request.query['priceCents[gte]'];
    // The LIMIT written out (a page and one row to tell whether there is a next): one plan per connection.
    const rows =
      from === undefined
        ? await sql<ProductRow[]>`select id, name, category, price_cents, created_at from demo.products order by price_cents, id limit 21`
        : await sql<
            ProductRow[]
          >`select id, name, category, price_cents, created_at from demo.products where price_cents >= ${from} order by price_cents, id limit 21`;
    const products = rows.slice(0, PAGE_SIZE).map(productItem);
    const origin = `${request.protocol}://${request.host}`;
    const self = `${origin}/v1/products?page-size=${PAGE_SIZE}&sort=priceCents${from === undefined ? '' : `&priceCents%5Bgte%5D=${from}`}`;
    const last = products.at(-1);
    const next =
      rows.length > PAGE_SIZE && last
        ? `${origin}/v1/products?page-size=${PAGE_SIZE}&cursor=${nextCursor(cursorSecret, last.priceCents, last.id, from)}`
        : undefined;
    reply.header('link', next ? `<${self}>; rel="self", <${next}>; rel="next"` : `<${self}>; rel="self"`);
    return { pageSize: PAGE_SIZE, products, _links: next ? { self: { href: self }, next: { href: next } } : { self: { href: self } } };
  },
);

await app.listen({ port, host: '127.0.0.1' });

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await app.close();
  await Promise.allSettled([sql.end({ timeout: 5 }), redis.quit()]);
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
