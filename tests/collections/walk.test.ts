// `npm run collections -- walk` (scripts/collections.ts): every collection of a file walked through a running service in
// each variant, its keys compared with a SELECT; a service that hides, repeats or adds rows is caught, naming the keys.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { runCollections as run } from '../helpers/collections-cli.ts';
import { testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { playlistTracks, SHOWS } from '../helpers/team-tables.ts';

const FIXTURE = `
  create schema team;
${playlistTracks(4)}${SHOWS}  create table team.rates (rate numeric primary key, label text not null);
  insert into team.rates values (1.10, 'a'), (2.500, 'b'), (0.0000001, 'c'), (123456789012345678901234567890.5, 'd'), (-7, 'e'), (10, 'f');
  create table team.events (id bigint primary key, at timestamptz not null, kind text not null);
  create index events_at on team.events (at, id);
  insert into team.events select n, timestamptz '2024-01-01Z' + (n % 6) * interval '1.000001 second', 'k' || (n % 3) from generate_series(1, 25) n;
  -- At the earliest instant the time walk's after= takes: not after it, so outside that walk, and in the others.
  insert into team.events values (26, timestamptz '0001-01-01T00:00:00Z', 'k0');
  -- What a service that loses, repeats and invents rows would serve in place of team.shows.
  create view team.shows_seen as
    select show_id, title, year from team.shows where show_id <> 's7'
    union all select show_id, title, year from team.shows where show_id = 's8'
    union all select 'x1', 'Extra', 2001;
  -- A view whose key is no key: 60 rows, 6 values of tenant.
  create table team.usage (id int primary key, tenant int not null, amount int not null);
  insert into team.usage select n, n % 6, n from generate_series(0, 59) n;
  create view team.usage_v as select * from team.usage;
  -- Rows each client reads by its claim.
  create table team.orders (id int primary key, tenant_id int not null, total int not null);
  create index orders_tenant on team.orders (tenant_id, id);
  insert into team.orders select n, n % 4, n from generate_series(1, 40) n;
`;

/** What the service serves. */
const SERVED = `
collections:
  - relation: team.playlist_track
    variants: [offset, page, cursor, time]
    timeColumn: added
    pageSize: { max: 8 }
  - relation: team.shows
    order: -year
    pageSize: { max: 7 }
  - relation: team.rates
    pageSize: { max: 4 }
  - relation: team.events
    variants: [time, cursor]
    defaultVariant: time
    timeColumn: at
    pageSize: { max: 6 }
  - relation: team.playlist_track
    name: plays_by_time
    variants: [time, page]
    defaultVariant: time
    timeColumn: added
    pageSize: { max: 8 }
  - relation: team.shows_seen
    key: [show_id]
    order: -year
    unindexedSorts: true
    pageSize: { max: 7 }
  - relation: team.usage_v
    name: usage
    key: [tenant]
    unindexedSorts: true
    variants: [cursor]
    pageSize: { max: 7 }
  - relation: team.orders
    variants: [cursor, offset]
    pageSize: { max: 4 }
    access: { rows: { tenant_id: tenant } }
`;

/** What the walk compares shows_seen with: the table it stands for. */
const SEEN_AS_SHOWS = `
collections:
  - relation: team.shows
    name: shows_seen
    order: -year
    pageSize: { max: 7 }
`;

t.test('walk', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(FIXTURE);
  const dir = t.testdir({});
  const write = (name: string, text: string) => {
    writeFileSync(path.join(dir, name), text);
    return path.join(dir, name);
  };
  const served = write('served.yaml', SERVED);
  const server = await startServer(t, await freePort(), { DATABASE_URL: database.url, COLLECTIONS: served, ADMIN_TOKEN });
  const env = { DATABASE_URL: database.url };

  // A key on a tier of its own, as an operator makes one for a walk (docs/reference/collections-file.md, "Tools").
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  await fetch(`${server.url}/admin/tiers/walk`, {
    method: 'PUT',
    headers: admin,
    body: JSON.stringify({ limit: 100_000, windowSeconds: 60, concurrency: 8 }),
  });
  const issued = (await (await fetch(`${server.url}/v1/keys`, { method: 'POST' })).json()) as { id: string; key: string };
  const patched = await fetch(`${server.url}/admin/keys/${issued.id}`, { method: 'PATCH', headers: admin, body: '{"tier":"walk"}' });
  t.equal(patched.status, 200, 'the key is on the walk tier');

  t.test('a composite key past 2^53, a text key with a nullable order, numeric keys, the time variant: each key once', async (t) => {
    const file = write('ok.yaml', SERVED.slice(0, SERVED.indexOf('  - relation: team.shows_seen')));
    const walk = await run(['walk', file, '--url', server.url, '--key', issued.key], env, dir);
    t.same([walk.code, walk.stderr], [0, ''], walk.stderr);
    t.equal(
      walk.stdout,
      [
        'playlist_track offset: 36 items in 5 requests: ok',
        'playlist_track page: 36 items in 5 requests: ok',
        'playlist_track cursor: 36 items in 5 requests: ok',
        'playlist_track time (after=0001-01-01T00:00:00): 36 items in 5 requests: ok',
        'shows offset: 40 items in 6 requests: ok',
        'shows page: 40 items in 6 requests: ok',
        'shows cursor: 40 items in 6 requests: ok',
        'rates offset: 6 items in 2 requests: ok',
        'rates page: 6 items in 2 requests: ok',
        'rates cursor: 6 items in 2 requests: ok',
        'events time (after=0001-01-01T00:00:00Z): 25 items in 5 requests: ok',
        'events cursor (since_id=0): 26 items in 5 requests: ok',
        'plays_by_time time (after=0001-01-01T00:00:00): 36 items in 5 requests: ok',
        'plays_by_time page: 36 items in 5 requests: ok',
        `${file}: 5 collections walked, every key exactly once`,
        '',
      ].join('\n'),
    );
  });

  t.test('rows the service does not serve, serves twice or invents: exit code 1, the keys named', async (t) => {
    const file = write('seen.yaml', SEEN_AS_SHOWS);
    const walk = await run(['walk', file, '--url', server.url, '--key', issued.key], env, dir);
    t.same([walk.code, walk.stderr], [1, ''], walk.stderr);
    const lines = walk.stdout.split('\n');
    // Offset and page read every row of the view: s8 twice, side by side in its order.
    for (const variant of ['offset', 'page']) {
      t.equal(
        lines.find((line) => line.startsWith(`shows_seen ${variant}:`)),
        `shows_seen ${variant}: 41 items in 6 requests, of 40 rows: 1 missing: s7; 1 more than once: s8; 1 not in team.shows: x1`,
      );
    }
    // A cursor walk passes the second s8 when a chunk ends between the two: its position is past it.
    t.match(
      lines.find((line) => line.startsWith('shows_seen cursor:')),
      /, of 40 rows: 1 missing: s7; (1 more than once: s8; )?1 not in team\.shows: x1$/,
    );
    t.equal(lines.at(-2), `${file}: 1 collection walked, with mismatches`);
  });

  t.test('a key two rows share: said so, and the rows the walk missed counted against count(*)', async (t) => {
    const file = write(
      'usage.yaml',
      `collections:\n${SERVED.slice(SERVED.indexOf('  - relation: team.usage_v'), SERVED.indexOf('  - relation: team.orders'))}`,
    );
    const walk = await run(['walk', file, '--url', server.url, '--key', issued.key], env, dir);
    t.same([walk.code, walk.stderr], [1, ''], walk.stderr);
    const lines = walk.stdout.split('\n');
    t.equal(
      lines[0],
      'usage: key tenant is not unique: 60 rows of team.usage_v share 6 of its values, so its walks cannot reach each row once (check tests a key where it can count the rows)',
    );
    // Each chunk of 7 ends within a tenant's 10 rows, and the next starts after that tenant: 3 of each never served.
    t.match(
      lines[1],
      /^usage cursor: 42 items in \d+ requests, of 60 rows: 18 missing: 0 \(7 of 10 rows walked\), 1 \(7 of 10 rows walked\), 2 \(7 of 10 rows walked\), 3 \(7 of 10 rows walked\), 4 \(7 of 10 rows walked\), … 1 more$/,
    );
    t.equal(lines[2], `${file}: 1 collection walked, with mismatches`);
  });

  t.test("row rules: compared with the key's rows, read from its claims, or not walked, saying why", async (t) => {
    const file = write(
      'orders.yaml',
      'collections:\n  - relation: team.orders\n    variants: [cursor, offset]\n    pageSize: { max: 4 }\n    access: { rows: { tenant_id: tenant } }\n',
    );
    const issue = async (claims: unknown) => {
      const response = await fetch(`${server.url}/admin/keys`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ tier: 'walk', name: 'walk', claims }),
      });
      t.equal(response.status, 201);
      return (await response.json()) as { id: string; key: string };
    };
    const one = await issue({ tenant: 2 });
    const two = await issue({ tenant: [1, 3] });
    const withAdmin = { ...env, ADMIN_TOKEN };

    const anonymous = await run(['walk', file, '--url', server.url], env, dir);
    t.same(anonymous, {
      code: 1,
      stdout: [
        'orders: not walked: only clients with credentials read it, each its own rows (access.rows): walk with --key',
        `${file}: 0 collections walked, every key exactly once; 1 not walked`,
        '',
      ].join('\n'),
      stderr: '',
    });
    const claimsUnknown = await run(['walk', file, '--url', server.url, '--key', one.key], env, dir);
    t.same(claimsUnknown, {
      code: 1,
      stdout: [
        "orders: not walked: it has row rules (access.rows), and a key reads only the rows its claims choose, which walk compares only knowing them: walk with --key and --key-id, ADMIN_TOKEN set, so that walk reads the key's claims (GET /admin/keys/{id})",
        `${file}: 0 collections walked, every key exactly once; 1 not walked`,
        '',
      ].join('\n'),
      stderr: '',
    });
    for (const [issued, rows] of [
      [one, 10],
      [two, 20],
    ] as const) {
      const walk = await run(['walk', file, '--url', server.url, '--key', issued.key, '--key-id', issued.id], withAdmin, dir);
      t.same([walk.code, walk.stderr], [0, ''], walk.stdout);
      t.equal(
        walk.stdout,
        [
          `orders cursor: ${rows} items in ${Math.ceil(rows / 4)} requests: ok`,
          `orders offset: ${rows} items in ${Math.ceil(rows / 4)} requests: ok`,
          `${file}: 1 collection walked, every key exactly once`,
          '',
        ].join('\n'),
      );
    }
    const wrongClaims = await issue({ region: 'eu' });
    const walk = await run(['walk', file, '--url', server.url, '--key', wrongClaims.key, '--key-id', wrongClaims.id], withAdmin, dir);
    t.equal(walk.code, 1);
    t.match(walk.stdout, /^orders: not walked: the service does not list it for this key/);

    const errors: [string, string[], Record<string, string>, string][] = [
      ['--key-id without --key', ['--key-id', one.id], withAdmin, '--key-id names the key --key gives: give --key too'],
      [
        '--key-id without ADMIN_TOKEN',
        ['--key', one.key, '--key-id', one.id],
        env,
        "--key-id: walk reads the key's claims through the operator API (GET /admin/keys/{id}): set ADMIN_TOKEN",
      ],
      [
        'a key id the service does not know',
        ['--key', one.key, '--key-id', 'key_nothing'],
        withAdmin,
        'No key key_nothing at the service (GET /admin/keys/key_nothing: 404; is ADMIN_TOKEN set there?)',
      ],
      [
        "another key's id",
        ['--key', one.key, '--key-id', two.id],
        withAdmin,
        `--key-id ${two.id} is not the key --key gives (its prefix is ${two.key.slice(0, 10)})`,
      ],
      [
        'a wrong ADMIN_TOKEN',
        ['--key', one.key, '--key-id', one.id],
        { ...env, ADMIN_TOKEN: 'not-the-token' },
        `ADMIN_TOKEN is not the operator token of the service at ${server.url} (GET /admin/keys/${one.id}: 403)`,
      ],
    ];
    for (const [name, args, caseEnv, line] of errors) {
      t.same(await run(['walk', file, '--url', server.url, ...args], caseEnv, dir), { code: 1, stdout: '', stderr: `${line}\n` }, name);
    }
  });

  t.test('errors: one line on stderr, exit code 1', async (t) => {
    const file = write('shows.yaml', 'collections: [{relation: team.shows}]\n');
    const port = await freePort();
    const cases: [string, string[], string][] = [
      ['no --url', ['walk', file], 'walk needs the service to walk: --url http://host:port'],
      [
        'a --url that is no URL',
        ['walk', file, '--url', 'localhost:3000'],
        'Invalid --url "localhost:3000": expected the service\'s http:// or https:// URL',
      ],
      [
        'no service there',
        ['walk', file, '--url', `http://127.0.0.1:${port}`],
        `Cannot reach the service at http://127.0.0.1:${port}: connection refused`,
      ],
    ];
    for (const [name, args, line] of cases) t.same(await run(args, env, dir), { code: 1, stdout: '', stderr: `${line}\n` }, name);
    const other = write('other.yaml', 'collections: [{relation: team.shows, name: programmes}]\n');
    t.same(
      await run(['walk', other, '--url', server.url], env, dir),
      { code: 1, stdout: '', stderr: `The service at ${server.url} does not serve programmes (is it serving ${other}?)\n` },
      'a collection the service does not serve',
    );
  });
});
