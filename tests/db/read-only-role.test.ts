// The team's database stays theirs (issue 40, item 5): with LIMITER_DATABASE_URL set to a database of its own, the
// service's whole state (its schema: keys, tiers, limiter, cursor secret, journal) lives there, and the data
// connection needs only SELECT on what is served. The data role here has CONNECT on its database, USAGE on one
// schema and SELECT on one table, nothing more (no CREATE, no TEMP, nothing on public); the service serves the table
// from a collections file, every row once along its cursor links, and the data database ends as it began. Without
// LIMITER_DATABASE_URL, such a role may not make the service's schema: start-up stops with one line that says so and
// names the two ways out (issue 47).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from 'postgres';
import t from 'tap';
import { scratchSession, serverUrl, urlFor } from '../helpers/db.ts';
import { childEnv, freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

const ROWS = 47;
const root = fileURLToPath(new URL('../..', import.meta.url));

/** Every schema, relation and function of the database, system ones included, and every privilege on them. */
async function catalogOf(sql: Sql): Promise<string[]> {
  const rows = await sql<{ line: string }[]>`
    select 'schema ' || nspname || ' ' || coalesce(nspacl::text, '-') as line from pg_namespace
    union all
    select 'relation ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '-')
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
    union all
    select 'function ' || n.nspname || '.' || p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    union all
    select 'type ' || n.nspname || '.' || t.typname from pg_type t join pg_namespace n on n.oid = t.typnamespace
    union all
    select 'database ' || datname || ' ' || coalesce(datacl::text, '-') from pg_database where datname = current_database()
    order by 1`;
  return rows.map((row) => row.line);
}

t.test('with a limiter database of its own, the service serves a team table through a role that may only SELECT it', async (t) => {
  const suffix = `${process.pid}_${randomBytes(4).toString('hex')}`;
  const dataName = `t_${suffix}_data`;
  const limiterName = `t_${suffix}_limiter`;
  const role = `t_${suffix}_reader`;
  const password = randomBytes(12).toString('hex');
  const admin = scratchSession(t, serverUrl());
  await admin.unsafe(`create database ${dataName}`);
  await admin.unsafe(`create database ${limiterName}`);
  await admin.unsafe(`create role ${role} login password '${password}'`);
  t.teardown(async () => {
    await admin.unsafe(`drop database if exists ${dataName} with (force)`);
    await admin.unsafe(`drop database if exists ${limiterName} with (force)`);
    await admin.unsafe(`drop role if exists ${role}`);
  });

  // The team's database: a table of theirs in a schema of theirs, and a role that may read that table and nothing else.
  const data = scratchSession(t, urlFor(dataName));
  await data.unsafe(`
    create schema shop;
    create table shop.items (sku text primary key, title text not null, price_cents int not null);
    insert into shop.items select 'sku-' || lpad(n::text, 3, '0'), 'Item ' || n, n * 10 from generate_series(1, ${ROWS}) n;
    revoke all on database ${dataName} from public;
    revoke all on schema public from public;
    grant connect on database ${dataName} to ${role};
    grant usage on schema shop to ${role};
    grant select on shop.items to ${role};`);
  // The role has nothing more than that: no CREATE or TEMP on the database, nothing on public, no CREATE on shop.
  const [may] = await data`
    select has_database_privilege(${role}, current_database(), 'CREATE') as create_schema,
      has_database_privilege(${role}, current_database(), 'TEMP') as temp,
      has_schema_privilege(${role}, 'public', 'USAGE') or has_schema_privilege(${role}, 'public', 'CREATE') as public,
      has_schema_privilege(${role}, 'shop', 'CREATE') as create_in_shop,
      has_table_privilege(${role}, 'shop.items', 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER') as write,
      has_table_privilege(${role}, 'shop.items', 'SELECT') as read,
      (select rolsuper or rolcreatedb or rolcreaterole from pg_roles where rolname = ${role}) as powers`;
  t.same(
    may,
    { create_schema: false, temp: false, public: false, create_in_shop: false, write: false, read: true, powers: false },
    'the data role may SELECT shop.items and nothing else',
  );
  const dataBefore = await catalogOf(data);

  const folder = await mkdtemp(path.join(tmpdir(), 'collections-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  const file = path.join(folder, 'collections.yaml');
  await writeFile(file, 'collections:\n  - relation: shop.items\n    fieldNames: camelCase\n');

  const readerUrl = new URL(urlFor(dataName));
  readerUrl.username = role;
  readerUrl.password = password;
  // Without a limiter database, the service's state would go on the data database, where the role may create nothing.
  const alone = spawn(process.execPath, ['server.ts'], {
    cwd: root,
    env: childEnv({ PORT: String(await freePort()), DATABASE_URL: readerUrl.toString(), COLLECTIONS: file }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  alone.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = await once(alone, 'exit');
  t.equal(code, 1, 'start-up stops');
  t.equal(
    stderr,
    `Could not start: the role ${role} may not create the service's schema paginated_collections in database ${dataName} ` +
      `(PostgreSQL: permission denied for database ${dataName}): grant it CREATE on the database (GRANT CREATE ON DATABASE ${dataName} TO ${role}), ` +
      "or set LIMITER_DATABASE_URL to a database where it may, which then holds the service's state (docs/how-to/limiter-databases.md)\n",
    'one line: permission denied, and the two ways out',
  );
  t.same(await catalogOf(data), dataBefore, 'and the data database is as it was');

  const server = await startServer(t, await freePort(), {
    DATABASE_URL: readerUrl.toString(),
    LIMITER_DATABASE_URL: urlFor(limiterName),
    COLLECTIONS: file,
  });

  // Every row once, along the cursor links, in key order.
  const seen: { sku: string; title: string; priceCents: number }[] = [];
  let next: string | undefined = `${server.url}/v1/items?page-size=10`;
  let chunks = 0;
  while (next !== undefined && chunks++ < 20) {
    const res = await fetch(next);
    t.equal(res.status, 200, next);
    t.ok(res.headers.get('x-ratelimit-limit'), 'rate limited');
    const body = (await res.json()) as { items: typeof seen; _links: { next?: { href: string } } };
    seen.push(...body.items);
    const href = body._links.next?.href;
    if (href !== undefined) t.match(href, /[?&]cursor=v1\./, 'a cursor link');
    next = href === undefined ? undefined : `${server.url}${new URL(href).pathname}${new URL(href).search}`;
  }
  t.equal(chunks, Math.ceil(ROWS / 10), 'over the chunks the page size makes');
  const table = await data`select sku, title, price_cents from shop.items order by sku`;
  t.same(
    seen,
    table.map((row) => ({ sku: row.sku, title: row.title, priceCents: row.price_cents })),
    'every row of the table once, in key order',
  );

  // The data database holds nothing new: no service schema, no table, function or type, no privilege changed.
  t.same(await catalogOf(data), dataBefore, 'the data database is as it was');
  t.same(
    dataBefore.filter((line) => line.startsWith('schema paginated_collections ')),
    [],
    'and it has no service schema (nor had one)',
  );

  // The service's state is on the limiter database: its schema, the cursor secret, the window of the address the
  // requests above came from, which holds at least a unit for each chunk (more when a chunk's statement took longer
  // than priced: docs/explanation/budgets.md, "Settled at the time it took").
  const limiter = scratchSession(t, urlFor(limiterName));
  const [state] = await limiter`
    select to_regclass('paginated_collections.rate_windows') is not null as windows,
      to_regclass('paginated_collections.__drizzle_migrations') is not null as journal,
      (select count(*)::int from pg_proc where pronamespace = to_regnamespace('paginated_collections') and proname = 'rate_decide') as decide,
      (select count(*)::int from paginated_collections.settings where name = 'cursor_secret') as secret,
      (select count(*)::int from paginated_collections.rate_tiers) > 0 as tiers,
      (select used::int from paginated_collections.rate_windows where subject = 'ip:127.0.0.1') >= ${chunks} as used,
      to_regnamespace('shop') is null as no_shop`;
  t.same(
    state,
    { windows: true, journal: true, decide: 1, secret: 1, tiers: true, used: true, no_shop: true },
    "the service's schema, its secret, tiers and the requests' window are on the limiter database",
  );
});
