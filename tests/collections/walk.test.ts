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
        `shows_seen ${variant}: 41 items in 6 requests: 1 missing: s7; 1 more than once: s8; 1 not in team.shows: x1`,
      );
    }
    // A cursor walk passes the second s8 when a chunk ends between the two: its position is past it.
    t.match(
      lines.find((line) => line.startsWith('shows_seen cursor:')),
      /: 1 missing: s7; (1 more than once: s8; )?1 not in team\.shows: x1$/,
    );
    t.equal(lines.at(-2), `${file}: 1 collection walked, with mismatches`);
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
