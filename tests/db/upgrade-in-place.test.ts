// An existing deployment upgrades in place (issue 40, item 5): a database as the last release with the service's
// tables in public left it (PUBLIC_SCHEMA_RELEASE's migrations and functions, tests/helpers/earlier-release.ts),
// holding what that release kept there (an issued key, changed tiers, the cursor secret, the limiter's windows, the
// demo's rows), is served by this release with COLLECTIONS=demo: the key still authenticates in its tier, the tiers
// keep their changes, cursors signed with the old secret still verify, the units a subject used still count, the
// demo's rows are served, and nothing of the service is left in public. A second start changes nothing.
import { createHash, randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import t from 'tap';
import { earlierCursorSecret } from '../../db/migrate.ts';
import { encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { emptyDatabase } from '../helpers/db.ts';
import { migrateAsPublicSchemaRelease } from '../helpers/earlier-release.ts';
import { freePort, stopProcess } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

/** Every row of `schema.table`, as JSON, in key order. */
async function rowsOf(sql: Sql, schema: string, table: string, key: string): Promise<unknown[]> {
  const rows = await sql.unsafe<{ row: unknown }[]>(`select to_jsonb(x) as row from ${schema}.${table} x order by ${key}`);
  return rows.map((r) => r.row);
}

/** What the service keeps: its tables' rows (the limiter's windows too), where they are now. */
async function serviceState(sql: Sql, schema: string): Promise<Record<string, unknown[]>> {
  return {
    settings: await rowsOf(sql, schema, 'settings', 'name'),
    rate_tiers: await rowsOf(sql, schema, 'rate_tiers', 'name'),
    api_keys: await rowsOf(sql, schema, 'api_keys', 'id'),
    rate_windows: await rowsOf(sql, schema, 'rate_windows', 'subject'),
  };
}

/**
 * The whole database as a list of lines: every schema, relation (with its options), column, constraint, index,
 * function and sequence outside PostgreSQL's own schemas, and every row of every table (journals, the functions'
 * record with its applied_at, the service's state, the demo's rows) and each sequence's position.
 */
async function snapshot(sql: Sql): Promise<string[]> {
  const user = "n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'";
  const catalog = await sql.unsafe<{ line: string }[]>(`
    select 'schema ' || n.nspname || ' ' || coalesce(n.nspacl::text, '-') as line from pg_namespace n where ${user}
    union all
    select 'relation ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.reloptions::text, '-')
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where ${user}
    union all
    select 'column ' || n.nspname || '.' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      where ${user} and a.attnum > 0 and not a.attisdropped
    union all
    select 'constraint ' || n.nspname || '.' || c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
      from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace where ${user}
    union all
    select 'index ' || pg_get_indexdef(i.indexrelid)
      from pg_index i join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace where ${user}
    union all
    select 'function ' || pg_get_functiondef(p.oid)
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where ${user}
    union all
    select 'sequence ' || schemaname || '.' || sequencename || ' at ' || coalesce(last_value::text, '-') from pg_sequences
    order by 1`);
  const lines = catalog.map((row) => row.line);
  const tables = await sql<{ schema: string; name: string }[]>`
    select n.nspname as schema, c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema' and c.relkind = 'r' order by 1, 2`;
  for (const { schema, name } of tables) {
    const rows = await sql.unsafe<{ row: string }[]>(`select to_jsonb(x)::text as row from "${schema}"."${name}" x order by 1`);
    for (const { row } of rows) lines.push(`row ${schema}.${name} ${row}`);
  }
  return lines;
}

async function get(url: string, key?: string): Promise<Response> {
  return fetch(url, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
}

t.test(
  "an earlier release's deployment upgrades in place, keeping its keys, tiers, cursor secret, limiter state and demo rows",
  async (t) => {
    const { url, sql } = await emptyDatabase(t);
    await migrateAsPublicSchemaRelease(t, sql);

    // ---- The state that release kept, in public, written as it wrote it.
    // A key issued by its POST /v1/keys (lib/ratelimit/keys.ts there): pck_ and 32 base64url characters, its SHA-256
    // stored, in tier free.
    const key = `pck_${randomBytes(24).toString('base64url')}`;
    const keyId = `key_${randomBytes(9).toString('base64url')}`;
    await sql`insert into public.api_keys (id, key_hash, prefix, name, tier)
    values (${keyId}, ${createHash('sha256').update(key).digest()}, ${key.slice(0, 10)}, 'kept', 'free')`;
    // Tiers an operator changed: an hour's window, so the units used below still count when the new release serves.
    await sql`update public.rate_tiers set allowance = 900, window_seconds = 3600 where name = 'free'`;
    await sql`update public.rate_tiers set allowance = 97, window_seconds = 3600 where name = 'anonymous'`;
    // The cursor secret that release generated at its first start (lib/pagination/cursor-secret.ts there).
    const oldSecret = randomBytes(32).toString('base64url');
    await sql`insert into public.settings (name, value) values ('cursor_secret', ${oldSecret})`;
    // The limiter's windows, by that release's own rate_decide in public: 250 units used by the key, 40 by the
    // address the test's requests come from.
    const decided = await sql`
    select idx, outcome, subject, remaining from public.rate_decide(
      ${`{${createHash('sha256').update(key).digest('hex')},NULL}`}::text[], '{ip:198.51.100.7,ip:127.0.0.1}'::text[],
      '{anonymous,anonymous}'::text[], '{250,40}'::int[], '{0,0}'::float8[], 0, '{}'::text[], '{}'::int[], '{}'::bigint[])
    order by idx`;
    t.same(
      decided.map((row) => [row.outcome, row.subject, Number(row.remaining)]),
      [
        ['ok', `key:${keyId}`, 650],
        ['ok', 'ip:127.0.0.1', 57],
      ],
      'the earlier release charged the key and the address',
    );
    // The demo's tables, in public, with a few rows (so the new release seeds nothing: it seeds only empty tables).
    await sql`insert into public.products (name, category, price_cents, created_at) values
    ('old anvil', 'tools', 1999, '2024-01-01T00:00:00Z'), ('old bucket', 'garden', 550, '2024-01-02T00:00:00Z'),
    ('old candle', 'home', 300, '2024-01-03T00:00:00Z')`;
    await sql`insert into public.orders (customer_id, status, total_cents, created_at)
    select n, 'paid', n * 100, timestamptz '2024-02-01T00:00:00Z' + n * interval '1 hour' from generate_series(1, 5) n`;
    await sql`insert into public.events (type, source, occurred_at, message) values
    ('login', 'web', '2024-03-01T00:00:00Z', 'first'), ('logout', 'web', '2024-03-01T01:00:00Z', 'second')`;

    const before = await serviceState(sql, 'public');
    const products = await rowsOf(sql, 'public', 'products', 'id');
    const orders = await sql`select id::int from public.orders order by id`;

    // ---- The new release starts on it.
    let server = await startServer(t, await freePort(), { DATABASE_URL: url, COLLECTIONS: 'demo' });
    t.notMatch(server.output(), /Seeded demo data/, 'the demo tables kept their rows: nothing seeded');

    t.same(
      await serviceState(sql, 'paginated_collections'),
      { ...before, api_keys: before.api_keys!.map((key) => ({ ...(key as object), collections: null, claims: {} })) },
      "the service's rows are in its schema, as they were; keys read every collection, with no claims (migration 0002)",
    );
    const [publicLeft] = await sql`
    select array(select relname::text from pg_class where relnamespace = 'public'::regnamespace order by 1) as relations,
      array(select proname::text from pg_proc where pronamespace = 'public'::regnamespace order by 1) as functions,
      array(select nspname::text from pg_namespace where nspname not like 'pg\\_%' and nspname <> 'information_schema' order by 1) as schemas`;
    t.same(
      publicLeft,
      { relations: [], functions: [], schemas: ['demo', 'drizzle', 'paginated_collections', 'public'] },
      'nothing left in public: no table, sequence, index or function (rate_decide and the rest are in the service schema)',
    );
    const [moved] = await sql`
    select to_regclass('paginated_collections.rate_windows') is not null as windows,
      to_regprocedure('paginated_collections.rate_decide(text[], text[], text[], integer[], double precision[], integer, text[], integer[], bigint[], integer[], bigint[], integer[], integer[])') is not null as decide,
      (select count(*)::int from demo.products) as products`;
    t.same(
      moved,
      { windows: true, decide: true, products: 3 },
      "the limiter's table and functions are in the service schema, the demo's rows in demo",
    );

    // The key authenticates, in its tier as changed, with the 250 units it used still counted (a /v1 costs 1).
    let res = await get(`${server.url}/v1`, key);
    t.equal(res.status, 200, 'the key authenticates');
    t.equal(res.headers.get('x-ratelimit-limit'), '900', "its tier's changed allowance");
    t.equal(res.headers.get('ratelimit-policy'), '"free";q=900;w=3600', 'its tier, as changed');
    t.equal(res.headers.get('x-ratelimit-remaining'), String(900 - 250 - 1), 'the units it used under the earlier release still count');
    // A key that was never issued is refused: the 200 above is the key's own.
    res = await get(`${server.url}/v1`, `pck_${randomBytes(24).toString('base64url')}`);
    t.equal(res.status, 401, 'an unknown key is refused');
    // The address: the anonymous tier as changed, its 40 units, and the unknown key's charge, still counting.
    res = await get(`${server.url}/v1`);
    t.equal(res.status, 200);
    t.equal(res.headers.get('x-ratelimit-limit'), '97', 'the anonymous tier keeps its changed allowance');
    const anonymousRemaining = Number(res.headers.get('x-ratelimit-remaining'));
    t.ok(anonymousRemaining <= 97 - 40 - 1, `the address's 40 units still count (remaining ${anonymousRemaining})`);
    t.ok(anonymousRemaining >= 97 - 40 - 1 - 5, 'and nothing much else was charged to it');

    // The demo's rows, served.
    res = await get(`${server.url}/v1/products`);
    t.equal(res.status, 200);
    const served = (await res.json()) as { products: { id: number; name: string; priceCents: number }[] };
    t.same(
      served.products.map((p) => [p.id, p.name, p.priceCents]),
      (products as { id: number; name: string; price_cents: number }[]).map((p) => [p.id, p.name, p.price_cents]),
      "the demo's products, as the earlier release had them",
    );
    res = await get(`${server.url}/v1/events`);
    t.equal(res.status, 200);
    t.same(
      ((await res.json()) as { events: { message: string }[] }).events.map((e) => e.message).sort(),
      ['first', 'second'],
      "the demo's events",
    );

    // Cursors are signed with the earlier release's secret: a cursor it issued still verifies, and the new release's
    // own are the same tokens. Orders, walked two at a time: every order once.
    const seen: number[] = [];
    let next: string | undefined = `${server.url}/v1/orders?page-size=2`;
    let pages = 0;
    while (next !== undefined && pages++ < 10) {
      res = await get(next);
      t.equal(res.status, 200, next);
      const body = (await res.json()) as { orders: { id: number }[]; _links: { next?: { href: string } } };
      seen.push(...body.orders.map((o) => o.id));
      const href = body._links.next?.href;
      next = href === undefined ? undefined : `${server.url}${new URL(href).pathname}${new URL(href).search}`;
      if (next !== undefined) {
        const token = new URL(next).searchParams.get('cursor')!;
        const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
        t.equal(token, encodeCursor(oldSecret, payload), "the cursor is signed with the earlier release's secret");
      }
    }
    t.same(
      seen.sort((a, b) => a - b),
      orders.map((o) => o.id),
      'every order once',
    );
    t.ok(pages >= 3, 'over several chunks');
    const firstChunk = (await (await get(`${server.url}/v1/orders?page-size=2`)).json()) as { _links: { next: { href: string } } };
    const token = new URL(firstChunk._links.next.href).searchParams.get('cursor')!;
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
    const signedByOld = encodeCursor(oldSecret, payload);
    res = await get(`${server.url}/v1/orders?page-size=2&cursor=${signedByOld}`);
    t.equal(res.status, 200, 'a cursor signed with the old secret is accepted');
    res = await get(`${server.url}/v1/orders?page-size=2&cursor=${encodeCursor(randomBytes(32).toString('base64url'), payload)}`);
    t.equal(res.status, 400, 'one signed with another secret is not: the signature is checked');

    // ---- A second start changes nothing: no table, function, row or journal entry, the limiter's state included.
    t.equal(await stopProcess(server.child), 0, 'the first instance stops');
    const settled = await snapshot(sql);
    server = await startServer(t, await freePort(), { DATABASE_URL: url, COLLECTIONS: 'demo' });
    const after = await snapshot(sql);
    t.same(after, settled, 'a second start changes nothing');
    t.ok(
      settled.some((line) => line.startsWith('row paginated_collections.rate_windows ') && line.includes(`key:${keyId}`)),
      "the snapshot holds the limiter's rows (what it compares is not empty)",
    );
    res = await get(`${server.url}/v1`, key);
    t.equal(res.status, 200);
    t.equal(res.headers.get('x-ratelimit-remaining'), String(900 - 250 - 2), 'the key still has its units used, across both starts');
  },
);

t.test("with LIMITER_DATABASE_URL, the limiter database takes over the data database's cursor secret at its first start", async (t) => {
  const data = await emptyDatabase(t);
  const limiter = await emptyDatabase(t);
  // That release migrated both; its cursor secret was made on the data database only (its startup read it there).
  await migrateAsPublicSchemaRelease(t, data.sql);
  await migrateAsPublicSchemaRelease(t, limiter.sql);
  const oldSecret = randomBytes(32).toString('base64url');
  await data.sql`insert into public.settings (name, value) values ('cursor_secret', ${oldSecret})`;
  await data.sql`insert into public.orders (customer_id, status, total_cents, created_at)
    select n, 'paid', n * 100, timestamptz '2024-02-01T00:00:00Z' + n * interval '1 hour' from generate_series(1, 5) n`;
  const dataBefore = await data.sql`select name, value from public.settings order by name`;

  const env = { DATABASE_URL: data.url, LIMITER_DATABASE_URL: limiter.url, COLLECTIONS: 'demo' };
  let server = await startServer(t, await freePort(), env);
  const [kept] = await limiter.sql`select value from paginated_collections.settings where name = 'cursor_secret'`;
  t.equal(kept?.value, oldSecret, "the limiter database keeps the earlier release's secret");
  t.same(await data.sql`select name, value from public.settings order by name`, dataBefore, 'the data database is only read');

  const first = (await (await get(`${server.url}/v1/orders?page-size=2`)).json()) as { _links: { next: { href: string } } };
  const token = new URL(first._links.next.href).searchParams.get('cursor')!;
  const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
  t.equal(token, encodeCursor(oldSecret, payload), "cursors are signed with the earlier release's secret");
  t.equal((await get(`${server.url}/v1/orders?page-size=2&cursor=${encodeCursor(oldSecret, payload)}`)).status, 200);

  // Once kept, it is the limiter database's own: a later change on the data database is not taken.
  t.equal(await stopProcess(server.child), 0);
  await data.sql`update public.settings set value = ${randomBytes(32).toString('base64url')} where name = 'cursor_secret'`;
  server = await startServer(t, await freePort(), env);
  const again = (await (await get(`${server.url}/v1/orders?page-size=2`)).json()) as { _links: { next: { href: string } } };
  const tokenAgain = new URL(again._links.next.href).searchParams.get('cursor')!;
  t.equal(tokenAgain, encodeCursor(oldSecret, JSON.parse(Buffer.from(tokenAgain.split('.')[1]!, 'base64url').toString('utf8'))));
});

t.test(
  "an earlier release's cursor secret: read where it may be, a new one where it may not, and no start when it cannot be asked",
  async (t) => {
    const db = await emptyDatabase(t);
    await db.sql`create schema drizzle`;
    await db.sql`create table drizzle.__drizzle_migrations (id serial primary key)`;
    await db.sql`create table public.settings (name text primary key, value text not null)`;
    await db.sql`insert into public.settings values ('cursor_secret', 'the-earlier-secret')`;
    t.equal(await earlierCursorSecret(db.url), 'the-earlier-secret');

    // A role that may see the tables but not read the settings: the service makes a secret of its own.
    const role = `t_${process.pid}_${randomBytes(4).toString('hex')}_nosecret`;
    const password = randomBytes(12).toString('hex');
    await db.sql.unsafe(`create role ${role} login password '${password}'`);
    t.teardown(() => db.sql.unsafe(`drop owned by ${role}; drop role if exists ${role}`));
    await db.sql.unsafe(`grant usage on schema drizzle to ${role}`);
    const url = new URL(db.url);
    url.username = role;
    url.password = password;
    t.equal(await earlierCursorSecret(url.toString()), undefined, 'no SELECT on it: none to take over');

    // A database that cannot be asked (nothing listens there) fails the start: a new secret, once kept, would be
    // for good, and every cursor handed out before would be refused.
    const away = new URL(db.url);
    away.port = String(await freePort());
    await t.rejects(earlierCursorSecret(away.toString()), 'the start fails rather than make a new secret');
  },
);
