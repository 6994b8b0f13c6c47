// The bench's floor (docs/benchmarks.md): the least work that answers the service's rate-limited
// chunk `GET /v1/products?page-size=20&sort=priceCents`, written by hand on node:http and postgres.js, with
// no framework and no query builder. Per request: one prepared counter upsert (asynchronous commit) and one
// prepared keyset select of the same 21 rows the service reads, answered with the same JSON, links and
// rate-limit headers. The service at or above this floor does its work as cheaply as this stack allows.
// It also answers that chunk from a price on (`&priceCents[gte]=N`, N a whole number): the bench's rows
// where every request asks for another chunk, so that no two requests can share a read.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import postgres from 'postgres';
import { nextCursor, type ProductRow, productItem } from './price-chunk.ts';

const PAGE_SIZE = 20;
// What the floor charges against: the service's anonymous tier as the bench raises it, so never a 429.
const ALLOWANCE = 1_000_000_000;
const WINDOW_SECONDS = 60;

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('The floor needs DATABASE_URL');
const port = Number(process.env.PORT ?? 4300);
const cursorSecret = randomBytes(32).toString('hex');

const POOL_SIZE = 10; // as many connections as the service's data pool
const options = {
  // int8 as JS numbers (ids, the counter), as the service reads them; timestamptz as PostgreSQL's text,
  // formatted below, so no microsecond is lost to a JS Date.
  types: {
    int8: { to: 20, from: [20], serialize: (n: number) => String(n), parse: (text: string) => Number(text) },
    timestamptz: { to: 1184, from: [1184], serialize: (text: string) => text, parse: (text: string) => text },
  },
  // The counter's commit does not wait for the WAL flush; UTC makes timestamptz text end in "+00".
  connection: { application_name: 'bench-floor', synchronous_commit: 'off', TimeZone: 'UTC' },
  // Idle connections close after 30 s, as the service's do: the bench's servers wait idle while the other
  // rows run, and a shared PostgreSQL has only so many connections.
  idle_timeout: 30,
  onnotice: () => {},
} satisfies postgres.Options<Record<string, postgres.PostgresType>>;

/**
 * Where each statement goes. By default, POOL_SIZE clients of one connection each, the statement on the
 * one with the fewest in flight: postgres.js 3.4.9's pool keeps its connections in queues whose array
 * only shrinks when a queue empties, and scans that array on every statement, so under continuous
 * pipelining its cost per statement grows without bound (docs/benchmarks.md); a
 * client of one connection empties its queue on every statement. FLOOR_POSTGRES_POOL=1 uses one
 * postgres.js pool of POOL_SIZE instead, to measure that.
 */
const clients =
  process.env.FLOOR_POSTGRES_POOL === '1'
    ? [postgres(databaseUrl, { ...options, max: POOL_SIZE })]
    : Array.from({ length: POOL_SIZE }, () => postgres(databaseUrl, { ...options, max: 1 }));
const inFlight = clients.map(() => 0);

async function run<T>(statement: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  let chosen = 0;
  for (let i = 1; i < clients.length; i++) if (inFlight[i]! < inFlight[chosen]!) chosen = i;
  inFlight[chosen]!++;
  try {
    return await statement(clients[chosen]!);
  } finally {
    inFlight[chosen]!--;
  }
}

try {
  await clients[0]!`create table if not exists bench_floor_counters (subject text primary key, used bigint not null)`;
} catch (error) {
  // Another bench run created it between the check and the create.
  if (!['23505', '42P07'].includes((error as { code?: string }).code ?? '')) throw error;
}

async function chunk(
  subject: string,
  origin: string,
  from: number | undefined,
): Promise<{ body: string; headers: Record<string, string> }> {
  const [counter] = await run(
    (sql) => sql<{ used: number; now: number }[]>`
      insert into bench_floor_counters (subject, used) values (${subject}, 1)
      on conflict (subject) do update set used = bench_floor_counters.used + 1
      returning used, extract(epoch from now())::int8 as now`,
  );
  // The LIMIT is written out (a page and one row to tell whether there is a next), so PostgreSQL plans the
  // prepared statement once per connection rather than on every call.
  const rows = await run((sql) =>
    from === undefined
      ? sql<ProductRow[]>`select id, name, category, price_cents, created_at from demo.products order by price_cents, id limit 21`
      : sql<
          ProductRow[]
        >`select id, name, category, price_cents, created_at from demo.products where price_cents >= ${from} order by price_cents, id limit 21`,
  );
  const items = rows.slice(0, PAGE_SIZE).map(productItem);
  const self = `${origin}/v1/products?page-size=${PAGE_SIZE}&sort=priceCents${from === undefined ? '' : `&priceCents%5Bgte%5D=${from}`}`;
  const last = items.at(-1);
  const next =
    rows.length > PAGE_SIZE && last
      ? `${origin}/v1/products?page-size=${PAGE_SIZE}&cursor=${nextCursor(cursorSecret, last.priceCents, last.id, from)}`
      : undefined;
  const links: Record<string, { href: string }> = { self: { href: self } };
  if (next) links.next = { href: next };
  const remaining = Math.max(0, ALLOWANCE - counter!.used);
  const reset = counter!.now + WINDOW_SECONDS;
  return {
    body: JSON.stringify({ pageSize: PAGE_SIZE, products: items, _links: links }),
    headers: {
      'content-type': 'application/json; charset=utf-8',
      link: next ? `<${self}>; rel="self", <${next}>; rel="next"` : `<${self}>; rel="self"`,
      'x-ratelimit-limit': String(ALLOWANCE),
      'x-ratelimit-remaining': String(remaining),
      'x-ratelimit-reset': String(reset),
      'ratelimit-policy': `"anonymous";q=${ALLOWANCE};w=${WINDOW_SECONDS}`,
      ratelimit: `"anonymous";r=${remaining};t=${WINDOW_SECONDS}`,
    },
  };
}

const server = createServer((request, response) => {
  const reply = (status: number, body: string, headers: Record<string, string> = { 'content-type': 'text/plain' }) => {
    response.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
    response.end(body);
  };
  const url = request.url ?? '/';
  if (url === '/readyz') return void reply(200, 'ready');
  const query = url.startsWith('/v1/products?') ? new URLSearchParams(url.slice(13)) : undefined;
  const from = query?.get('priceCents[gte]') ?? null;
  if (
    request.method !== 'GET' ||
    query?.get('page-size') !== String(PAGE_SIZE) ||
    query.get('sort') !== 'priceCents' ||
    query.size !== (from === null ? 2 : 3) ||
    (from !== null && !/^(0|[1-9][0-9]{0,8})$/.test(from))
  ) {
    return void reply(404, `The floor answers only GET /v1/products?page-size=${PAGE_SIZE}&sort=priceCents[&priceCents[gte]=N]`);
  }
  const origin = `http://${request.headers.host ?? `127.0.0.1:${port}`}`;
  chunk(request.socket.remoteAddress ?? 'unknown', origin, from === null ? undefined : Number(from)).then(
    ({ body, headers }) => reply(200, body, headers),
    (error: Error) => reply(503, `Database: ${error.message}`),
  );
});
server.listen(port, '127.0.0.1', () => console.log(`Floor listening on ${port}`));
process.on('SIGTERM', () =>
  server.close(() => void Promise.all(clients.map((client) => client.end({ timeout: 5 }))).then(() => process.exit(0))),
);
