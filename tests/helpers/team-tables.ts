// A team's own tables and the collections file that serves them (issue 40): uuid, text, composite and int8 keys,
// nullable sort keys with NULLs, mixed-case names, every common type with edge values, domains, arrays of one and
// several dimensions, a view, a partitioned table, another schema. tests/pagination/team-tables.test.ts walks them
// against SQL; tests/openapi/team-collections.test.ts checks the document, the typed client and /docs over them.

/**
 * team.shows: 40 shows keyed by text, a third of them with a NULL year (a nullable first sort key), indexed by
 * (year, show_id).
 */
export const SHOWS = `
  create table team.shows (show_id text primary key, title text not null, year int);
  create index shows_year on team.shows (year, show_id);
  insert into team.shows select 's' || n, 'Show ' || n, case when n % 3 = 0 then null else 2000 + n % 5 end from generate_series(1, 40) n;
`;

/**
 * team.playlist_track: `playlists` × 9 rows keyed by (playlist_id, track_id), track ids past 2^53, timestamps a
 * microsecond apart and shared (a time variant over a composite key).
 */
export function playlistTracks(playlists: number): string {
  return `
  create table team.playlist_track (
    playlist_id int not null, track_id bigint not null, added timestamp not null, primary key (playlist_id, track_id));
  create index playlist_track_added on team.playlist_track (added, playlist_id, track_id);
  insert into team.playlist_track
  select p, 9007199254740990 + t, timestamp '2024-03-01 10:00:00.000001' + ((p * t) % 4) * interval '1 microsecond'
  from generate_series(1, ${playlists}) p, generate_series(1, 9) t;
`;
}

export const FIXTURE = `
  create schema team;
  create schema "Music";
  create type team.mood as enum ('happy', 'sad', 'meh');
  create table team.things (
    id uuid primary key,
    label text not null,
    rank int,
    score numeric,
    big bigint not null,
    small smallint not null,
    ratio float8,
    tiny real,
    flag boolean,
    day date,
    at_local timestamp(6),
    at_utc timestamptz not null,
    clock time,
    clock_tz timetz,
    span interval,
    mood team.mood,
    tags text[],
    nums int8[],
    days date[],
    doc jsonb,
    search tsvector,
    code char(4)
  );
  create index things_rank on team.things (rank, id);
  create index things_score on team.things (score, id);
  create index things_day on team.things (day, id);
  create index things_mood on team.things (mood, id);
  create index things_label on team.things (label, id);
  create index things_big on team.things (big, id);
  create index things_at_utc on team.things (at_utc, id);
  insert into team.things
  select md5('thing' || n)::uuid, 'label ' || (n % 13),
    case when n % 4 = 0 then null else n % 7 end,
    case when n % 5 = 0 then null else (n % 9) * 1.25 end,
    9007199254740993 + n * 1000, (n % 100) - 50, n / 3.0, n / 7.0, n % 2 = 0,
    case when n % 6 = 0 then null else date '2020-01-01' + n end,
    timestamp '2024-01-01 00:00:00.000001' + n * interval '1 hour 1 microsecond',
    timestamptz '2024-01-01T00:00:00Z' + (n % 20) * interval '1.000001 second',
    time '10:00' + n * interval '1 minute 0.5 second', timetz '10:00:00+02' + n * interval '1 minute',
    n * interval '1 day 1 microsecond' - interval '1 month',
    case when n % 7 = 0 then null else (array['happy', 'sad', 'meh'])[1 + n % 3]::team.mood end,
    array['a' || n, null], array[9223372036854775807, n], array[date '2020-01-01' + n, null],
    jsonb_build_object('n', n, 'big', 12345678901234567890::numeric), to_tsvector('simple', 'word ' || n), (n % 10)::text
  from generate_series(1, 60) n;
  insert into team.things values
    ('00000000-0000-0000-0000-000000000001', 'edge', 3, 123456789012345678901234567890.123456789012345678901234567890,
     9223372036854775807, -32768, 'NaN', '-Infinity', false, '0044-03-15 BC', '2024-02-29 23:59:59.999999',
     '2024-06-01T12:34:56.789012Z', '24:00:00', '10:00:00.5+05:30', '-1 year 2 months 3 days -04:05:06.5', 'meh',
     '{NULL,"a b",""}', '{-9223372036854775808,NULL}', '{2020-02-29,NULL}',
     '{"x": [1, 1.0, 12345678901234567890123], "s": "é\\"", "n": null}', 'b:2 a:1', 'ab'),
    ('00000000-0000-0000-0000-000000000002', 'edge', 5, 'NaN', -9223372036854775808, 32767, 'Infinity', 1.5e-7, true,
     'infinity', '0001-01-01 00:00:00', '2024-06-01T12:34:56.789013Z', '00:00:00.000001', '23:59:59-11', '0', 'happy',
     '{}', '{}', '{}', '[]', '', null);
${SHOWS}  create view team.show_titles as select show_id, title, year from team.shows;
${playlistTracks(5)}  create table "Music"."Album" ("AlbumId" integer primary key, "Title" varchar(160), "ArtistId" integer not null);
  create index "Album_Title" on "Music"."Album" ("Title", "AlbumId");
  insert into "Music"."Album" select n, case when n % 4 = 1 then null else 'Album ' || (n % 6) end, n % 3 from generate_series(1, 30) n;
  create table team.payments (
    payment_id bigint not null, paid_at timestamptz not null, amount numeric(7, 2) not null, primary key (paid_at, payment_id)
  ) partition by range (paid_at);
  create table team.payments_2024 partition of team.payments for values from ('2024-01-01') to ('2025-01-01');
  create table team.payments_2025 partition of team.payments for values from ('2025-01-01') to ('2026-01-01');
  insert into team.payments
  select n, timestamptz '2024-11-01Z' + (n % 11) * interval '9 days', n * 1.01 from generate_series(1, 35) n;
  create domain team.year as integer check (value >= 1901 and value <= 2155);
  create domain team.nick as varchar(8);
  create table team.oddities (
    id bigint primary key, released team.year, nick team.nick, price numeric(7, 2), grid int[], stamps timestamptz[],
    moods team.mood[], docs jsonb[], blob bytea);
  insert into team.oddities
  select 9007199254740990 + n, case when n % 5 = 0 then null else 1901 + n * 3 end, 'n' || n,
    case when n % 7 = 0 then null else n * 1.01 end,
    case n % 3 when 0 then array[[n, null], [n + 1, n + 2]] when 1 then array[n] else '{}' end,
    array[timestamptz '2024-01-01Z' + n * interval '1.000001 second', null],
    array['happy', null]::team.mood[], array['{"a": 1}'::jsonb, null, '[1, 2.50]'], decode(lpad(to_hex(n), 2, '0'), 'hex')
  from generate_series(1, 30) n;
  insert into team.oddities values
    (9223372036854775807, 2155, 'exactly8', 'NaN', '{{{1}},{{2}}}',
     array['infinity', '-infinity', '0044-03-15 12:00:00Z BC', '10000-01-01 00:00:00Z']::timestamptz[], '{}', '{}', '\\x');
  analyze team.things;
`;

export const FILE = `
collections:
  - relation: team.things
    filters:
      id: [eq, in]
      rank: [eq, lt, gte, in, isnull]
      score: [gt, isnull]
      big: [eq, gt]
      small: [eq]
      ratio: [lt]
      flag: [eq]
      day: [gte, lt, isnull]
      at_local: [gte]
      at_utc: [gte]
      clock: [lt]
      clock_tz: [lt]
      span: [gt]
      mood: [eq, in]
      label: [prefix]
      code: [eq]
    sort: [rank, score, day, mood, label, big, at_utc]
    variants: [offset, page, cursor, time]
    timeColumn: at_utc
  - relation: team.shows
    order: -year
  - relation: team.show_titles
    key: [show_id]
    sort: [year]
    unindexedSorts: true
  - relation: team.show_titles
    name: show_titles_by_year
    key: [show_id]
    order: -year
    unindexedSorts: true
  - relation: team.playlist_track
    variants: [offset, page, cursor, time]
    timeColumn: added
  - relation: '"Music"."Album"'
    fieldNames: camelCase
    sort: [Title]
  - relation: team.payments
    variants: [cursor, time, offset, page]
    timeColumn: paid_at
  - relation: team.oddities
    columns: [id, released, nick, price, grid, stamps, moods, docs, blob]
    filters:
      released: [eq, in, lt, isnull]
      nick: [eq, prefix]
      price: [gt]
`;
