// Odd timestamps written with plain SQL: what RFC 3339 cannot print is refused by a constraint; the edges print and walk.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { openDatabase } from '../../db/client.ts';
import { startEmbedded } from '../../db/embedded.ts';
import { runMigrations } from '../../db/migrate.ts';
import { demoRegistry } from '../../demo/collections.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { scratchDatabase, serverUrl, withSession } from '../helpers/db.ts';
import { followNext } from '../helpers/walk.ts';

/** A new database on `server` with all migrations applied, dropped at teardown. */
async function newDatabase(t: Test, server: string): Promise<string> {
  const { url } = await scratchDatabase(t, server);
  await runMigrations(url);
  await migrateDemo(url);
  return url;
}

const columns = [
  {
    table: 'products',
    column: 'created_at',
    insert: (v: string) => `insert into demo.products (name, category, price_cents, created_at) values ('odd', 'books', 1, '${v}')`,
  },
  {
    table: 'orders',
    column: 'created_at',
    insert: (v: string) => `insert into demo.orders (customer_id, status, total_cents, created_at) values (1, 'paid', 1, '${v}')`,
  },
  {
    table: 'events',
    column: 'occurred_at',
    insert: (v: string) => `insert into demo.events (type, source, occurred_at) values ('login', 'web', '${v}')`,
  },
];

// What RFC 3339 cannot print: infinite, BC (also one that is year 1 only in its own offset), year 10000 and on.
const refused = [
  'infinity',
  '-infinity',
  '10000-01-01T00:00:00Z',
  '0044-03-15 12:00:00+00 BC',
  '0001-12-31 23:59:59.999999+00 BC',
  '0001-01-01T00:00:00+00:01',
  '9999-12-31T23:59:59.999999-00:01',
  '294276-12-31 23:59:59+00',
];

// Literals an operator may write, and how the API prints them: UTC, six fractional digits.
const edges: [string, string][] = [
  ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000000Z'],
  ['0001-01-01T15:59:00+15:59', '0001-01-01T00:00:00.000000Z'], // the same instant: a tie on the timestamp
  ['0001-01-01 00:00:00.000001+00', '0001-01-01T00:00:00.000001Z'],
  ['0999-12-31T23:00:00-01:00', '1000-01-01T00:00:00.000000Z'],
  ['1969-12-31T23:59:59.999999Z', '1969-12-31T23:59:59.999999Z'],
  ['2024-02-29T23:59:59.999999-00:01', '2024-03-01T00:00:59.999999Z'],
  ['2025-06-01T12:00:00.123456+14:00', '2025-05-31T22:00:00.123456Z'],
  ['2025-06-01T12:00:00.123456+14:00', '2025-05-31T22:00:00.123456Z'],
  ['2025-06-01T12:00:00.123456-12:00', '2025-06-02T00:00:00.123456Z'],
  ['2025-06-01T12:00:00.5+05:45', '2025-06-01T06:15:00.500000Z'],
  ['2025-06-01T12:00:00-03:30', '2025-06-01T15:30:00.000000Z'],
  ['2025-01-01 00:00:00', '2024-12-31T18:15:00.000000Z'], // no offset: the inserting session's zone, Asia/Kathmandu
  ['9999-12-31T08:00:59.999999-15:59', '9999-12-31T23:59:59.999999Z'],
  ['9999-12-31T23:59:59.999999Z', '9999-12-31T23:59:59.999999Z'],
];

async function insertEdges(url: string): Promise<void> {
  // As an operator's SQL would come: one plain connection, in its own time zone.
  await withSession(
    url,
    async (sql) => {
      for (const [at, [literal]] of edges.entries()) {
        const name = at % 2 === 0 ? 'a' : 'b';
        await sql.unsafe(
          `insert into demo.products (name, category, price_cents, created_at) values ('${name}', 'books', ${at}, '${literal}')`,
        );
        await sql.unsafe(`insert into demo.orders (customer_id, status, total_cents, created_at) values (1, 'paid', ${at}, '${literal}')`);
        await sql.unsafe(`insert into demo.events (type, source, occurred_at) values ('login', 'web', '${literal}')`);
      }
    },
    { connection: { TimeZone: 'Asia/Kathmandu' } },
  );
}

type Item = { id: number; name?: string; createdAt?: string; occurredAt?: string };

/** The items of a walk along next from `first`. */
async function walk(app: ReturnType<typeof buildApp>, first: string, collection: string): Promise<Item[]> {
  const chunks = await followNext(first, async (path) => {
    const res = await app.request(`http://test.local${path}`);
    return { status: res.status, body: await res.json() };
  });
  return chunks.flatMap((chunk) => chunk[collection] as Item[]);
}

// The expected order of the edge rows (ids 1 … n in insertion order): prints compare as text, years being four digits.
type Row = { id: number; print: string; name: string };
const rows: Row[] = edges.map(([, print], at) => ({ id: at + 1, print, name: at % 2 === 0 ? 'a' : 'b' }));
const cmp = (a: string | number, b: string | number) => (a < b ? -1 : a > b ? 1 : 0);
const ascending = [...rows].sort((a, b) => cmp(a.print, b.print) || a.id - b.id);
const descending = [...ascending].reverse();
const mixed = [...rows].sort((a, b) => cmp(b.print, a.print) || cmp(a.name, b.name) || a.id - b.id);
const pairs = (list: Row[]) => list.map((row) => [row.id, row.print]);

async function checkWalks(t: Test, url: string, timeZone: string): Promise<void> {
  await withSession(url, (sql) => sql.unsafe(`alter database ${new URL(url).pathname.slice(1)} set timezone = '${timeZone}'`));
  const database = openDatabase(url, { max: 2 }); // new sessions: they take the database's TimeZone
  t.teardown(() => database.close());
  const [{ zone }] = (await database.sql`select current_setting('TimeZone') as zone`) as unknown as [{ zone: string }];
  t.equal(zone, timeZone, 'the service runs in that session time zone');
  const app = buildApp({ database, config: parseConfig({}), registry: demoRegistry(), cursorSecret: 'x'.repeat(32), log: () => {} });
  const as = (items: Item[]) => items.map((item) => [item.id, item.createdAt ?? item.occurredAt]);
  const walks: [string, string, Row[]][] = [
    ['events', '/v1/events?page-size=3', descending],
    ['events', `/v1/events?page-size=3&before=${encodeURIComponent('9999-12-31T23:59:59.999999-00:01')}`, descending],
    ['events', `/v1/events?page-size=3&after=${encodeURIComponent('0001-01-01T00:00:00+00:01')}`, ascending],
    ['events', '/v1/events?page-size=3&since_id=0', [...rows]],
    ['orders', '/v1/orders?page-size=3', descending],
    ['products', '/v1/products?page-size=3&sort=createdAt', ascending],
    ['products', '/v1/products?page-size=3&sort=-createdAt,name', mixed],
    ['products', '/v1/products?limit=3&sort=createdAt&count=none', ascending],
  ];
  for (const [collection, first, expected] of walks) {
    t.same(as(await walk(app, first, collection)), pairs(expected), `${timeZone}: ${first} prints and visits every row once, in order`);
  }
  // From the last chunk of the newest-first walk, prev and its next links lead back up to the newest.
  const oldest = await app.request(`http://test.local/v1/events?page-size=3&before=${encodeURIComponent('0001-01-01T00:00:00.000001Z')}`);
  const oldestBody = (await oldest.json()) as { events: Item[]; _links: { prev: { href: string } } };
  t.same(as(oldestBody.events), pairs(descending.filter((row) => row.print < '0001-01-01T00:00:00.000001Z')));
  // prev moves to items strictly newer than the chunk's first (newest) item: the rest, oldest first.
  const newestOfChunk = ascending.findIndex((row) => row.id === oldestBody.events[0]!.id);
  const up = await walk(app, oldestBody._links.prev.href.replace('http://test.local', ''), 'events');
  t.same(as(up), pairs(ascending.slice(newestOfChunk + 1)), `${timeZone}: prev from the oldest walks up`);
}

async function checkRefused(t: Test, url: string): Promise<void> {
  await withSession(url, async (sql) => {
    for (const { table, column, insert } of columns) {
      for (const value of refused) {
        const error = await sql.unsafe(insert(value)).then(
          () => undefined,
          (e: unknown) => e as { code?: string; constraint_name?: string },
        );
        t.match(
          error,
          { code: '23514', constraint_name: `${table}_${column}_rfc3339` },
          `${table}.${column} = ${value} is refused by its constraint`,
        );
      }
      // An update cannot sneak one in either.
      const update = await sql.unsafe(`update demo.${table} set ${column} = 'infinity'`).then(
        () => undefined,
        (e: unknown) => e as { constraint_name?: string },
      );
      t.match(update, { constraint_name: `${table}_${column}_rfc3339` }, `${table}: an update to infinity is refused`);
    }
  });
}

t.test(
  'the test server (DATABASE_URL, PostgreSQL 15 here): odd values refused, edges print exactly and walk in any session time zone',
  async (t) => {
    const url = await newDatabase(t, serverUrl());
    await insertEdges(url);
    await checkRefused(t, url);
    for (const zone of ['UTC', 'Pacific/Kiritimati', 'America/St_Johns']) await checkWalks(t, url, zone);
  },
);

t.test('embedded PostgreSQL 18: the same', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'odd-data-'));
  chmodSync(dir, 0o777); // as root, the server runs as the postgres user, which must reach its data directory
  const server = await startEmbedded({ dataDir: path.join(dir, 'data') });
  t.teardown(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const version = await withSession(server.url, (sql) => sql`select current_setting('server_version_num')::int as v`);
  t.ok(version[0]!.v >= 180000, `the embedded server is PostgreSQL 18 (${version[0]!.v})`);
  const url = await newDatabase(t, server.url);
  await insertEdges(url);
  await checkRefused(t, url);
  await checkWalks(t, url, 'Pacific/Kiritimati');
});
