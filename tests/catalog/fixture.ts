// The catalog fixture: relations of every kind the catalog reader and the collections file must handle, made in SQL.
import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import { scratchSession, serverUrl, type TestDatabase, withSession } from '../helpers/db.ts';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * Schemas `shop` and "Music": uuid, text, composite and unique-not-null keys, a relation without one,
 * nullable columns, mixed-case names, numeric, date, timestamp without time zone, boolean, an enum, arrays,
 * jsonb, tsvector, bytea, point, a domain, a view, a materialized view, a partitioned table with two
 * partitions, and indexes that serve orders and others that cannot (expression, partial, pattern, gin).
 */
const FIXTURE_SQL = `
  create schema shop;
  create schema "Music";
  create type shop.mood as enum ('happy', 'sad', 'meh');
  create domain shop.price as numeric(10, 2) not null check (value >= 0);
  create domain shop.cheap as shop.price check (value < 100);
  create table shop.films (
    film_id uuid primary key default gen_random_uuid(),
    title text not null,
    rating shop.mood,
    price shop.price,
    bargain shop.cheap,
    length_minutes smallint,
    released date,
    updated_at timestamp(3) without time zone not null default now(),
    available boolean not null default true,
    tags text[],
    scores numeric(5, 2)[],
    moods shop.mood[],
    extra jsonb,
    search tsvector,
    secret text,
    poster bytea,
    spot point,
    big bigint,
    seen_at timestamptz
  );
  create index films_title_idx on shop.films (title, film_id);
  create index films_released_idx on shop.films (released desc nulls last, film_id desc);
  create index films_rating_idx on shop.films (rating, film_id);
  create index films_upper_title_idx on shop.films (upper(title), film_id);
  create index films_available_idx on shop.films (updated_at, film_id) where available;
  create index films_title_pattern_idx on shop.films (title text_pattern_ops);
  create index films_big_idx on shop.films (big);
  create index films_tags_idx on shop.films using gin (tags);
  create table shop.countries (code text primary key, name varchar(80) not null unique, capital text unique);
  create table shop.film_actor (
    actor_id smallint not null,
    film_id uuid not null references shop.films,
    primary key (actor_id, film_id)
  );
  create index film_actor_film_idx on shop.film_actor (film_id, actor_id);
  create table shop.ledger (account text not null, ref text not null, note text, constraint ledger_account_ref unique (account, ref));
  create table shop.notes (body text);
  create table shop.spans (id int primary key, during interval hour to second(3), at time(2), zoned timetz, bits bit(4));
  create view shop.film_titles as select film_id, title, released from shop.films;
  create materialized view shop.film_counts as select rating, count(*) as films from shop.films group by rating;
  create unique index film_counts_rating_idx on shop.film_counts (rating);
  create table shop.payments (
    payment_id bigint not null,
    paid_at timestamptz not null,
    amount numeric(5, 2) not null,
    primary key (paid_at, payment_id)
  ) partition by range (paid_at);
  create table shop.payments_2024 partition of shop.payments for values from ('2024-01-01') to ('2025-01-01');
  create table shop.payments_2025 partition of shop.payments for values from ('2025-01-01') to ('2026-01-01');
  create table "Music"."Album" (
    "AlbumId" integer generated always as identity primary key,
    "Title" varchar(160) not null,
    "ArtistId" integer not null
  );
  create index "IFK_AlbumArtistId" on "Music"."Album" ("ArtistId", "AlbumId");
  insert into shop.films (title, released, price, bargain) select 'Film ' || n, date '2020-01-01' + n, n, n from generate_series(1, 50) n;
  insert into shop.payments values (1, '2024-03-01', 1.5), (2, '2024-04-01', 2), (3, '2025-05-01', 3);
  analyze shop.films;
  analyze shop.payments_2024;
  analyze shop.payments_2025;
`;

/** The fixture in `database`. */
export async function makeFixture(database: TestDatabase): Promise<void> {
  await database.sql.unsafe(FIXTURE_SQL);
}

/**
 * A role that may read shop.films' film_id and title and nothing else of it, and "Music" not at all, and a
 * one-connection client that acts as it (SET ROLE); both are gone when the test ends.
 */
export async function readOnlyClient(t: Teardown, database: TestDatabase): Promise<Sql> {
  const role = `reader_${randomBytes(4).toString('hex')}`;
  await database.sql.unsafe(`
    create role ${role} nologin;
    grant usage on schema shop to ${role};
    grant select (film_id, title) on shop.films to ${role};
    grant select on shop.countries, shop.film_titles to ${role};
  `);
  // Teardowns run last first: the client ends before its role goes.
  t.teardown(async () => {
    // Roles are the cluster's: its grants go first, unless the database's own teardown dropped them with it.
    await withSession(database.url, (inDatabase) => inDatabase.unsafe(`drop owned by ${role}`).catch(() => {}));
    await withSession(serverUrl(), (admin) => admin.unsafe(`drop role if exists ${role}`));
  });
  const sql = scratchSession(t, database.url);
  await sql.unsafe(`set role ${role}`);
  return sql;
}
