// The catalog reader against the fixture: relations of each kind, columns and their types, keys, btree indexes, privileges.
import t from 'tap';
import type { CatalogModel, Column, Relation } from '../../lib/catalog/model.ts';
import { findRelation, listedRelations } from '../../lib/catalog/model.ts';
import { readCatalog } from '../../lib/catalog/read.ts';
import { testDatabase } from '../helpers/db.ts';
import { makeFixture, readOnlyClient } from './fixture.ts';

const SERVICE = 'service';

function relation(model: CatalogModel, schema: string, name: string): Relation {
  const found = findRelation(model, { schema, name });
  if (!found) throw new Error(`Fixture: no ${schema}.${name}`);
  return found;
}

function column(relation: Relation, name: string): Column {
  const found = relation.columns.find((column) => column.name === name);
  if (!found) throw new Error(`Fixture: no column ${name} in ${relation.name}`);
  return found;
}

t.test('the fixture as the catalog has it', async (t) => {
  const database = await testDatabase(t);
  await makeFixture(database);
  const model = await readCatalog(database.sql, { schemas: ['shop', 'Music'], serviceSchema: SERVICE });

  t.test('relations: every kind, partitions marked and not listed, in schema and name order', async (t) => {
    const kinds = Object.fromEntries(model.relations.map((r) => [`${r.schema}.${r.name}`, r.kind]));
    t.same(kinds, {
      'Music.Album': 'table',
      'shop.countries': 'table',
      'shop.film_actor': 'table',
      'shop.film_counts': 'materialized view',
      'shop.film_titles': 'view',
      'shop.films': 'table',
      'shop.ledger': 'table',
      'shop.notes': 'table',
      'shop.payments': 'partitioned table',
      'shop.payments_2024': 'table',
      'shop.payments_2025': 'table',
      'shop.spans': 'table',
    });
    t.same(relation(model, 'shop', 'payments_2024').partitionOf, { schema: 'shop', name: 'payments' });
    t.same(
      listedRelations(model)
        .filter((r) => r.name.startsWith('payments_'))
        .map((r) => r.name),
      [],
      'partitions are not listed',
    );
    t.ok(
      listedRelations(model).some((r) => r.name === 'payments'),
      'their parent is',
    );
  });

  t.test('estimates: reltuples, summed over the partitions; none for a view or a relation never analyzed', async (t) => {
    t.equal(relation(model, 'shop', 'films').estimatedRows, 50);
    t.equal(relation(model, 'shop', 'payments').estimatedRows, 3);
    t.equal(relation(model, 'shop', 'film_titles').estimatedRows, undefined);
    t.equal(relation(model, 'shop', 'notes').estimatedRows, undefined);
  });

  t.test('columns: catalog names in attnum order, types through domains, enums, arrays and typmods', async (t) => {
    const album = relation(model, 'Music', 'Album');
    t.same(
      album.columns.map((c) => [c.name, c.type.formatted, c.nullable]),
      [
        ['AlbumId', 'integer', false],
        ['Title', 'character varying(160)', false],
        ['ArtistId', 'integer', false],
      ],
    );
    t.equal(column(album, 'Title').type.length, 160);
    const films = relation(model, 'shop', 'films');
    t.match(column(films, 'price'), {
      nullable: false,
      type: { name: 'numeric', formatted: 'numeric(10,2)', precision: 10, scale: 2, domains: [{ schema: 'shop', name: 'price' }] },
    });
    t.same(
      column(films, 'bargain').type.domains.map((d) => d.name),
      ['cheap', 'price'],
      'a domain over a domain: outermost first, NOT NULL inherited',
    );
    t.equal(column(films, 'bargain').nullable, false);
    t.match(column(films, 'rating').type, { schema: 'shop', name: 'mood', typtype: 'e', enumLabels: ['happy', 'sad', 'meh'] });
    t.equal(column(films, 'rating').nullable, true);
    t.match(column(films, 'updated_at').type, { name: 'timestamp', formatted: 'timestamp(3) without time zone', precision: 3 });
    t.match(column(films, 'seen_at').type, { name: 'timestamptz', typmod: -1 });
    t.match(column(films, 'tags').type, { category: 'A', formatted: 'text[]', element: { name: 'text' } });
    t.match(column(films, 'scores').type, { element: { name: 'numeric', precision: 5, scale: 2 } });
    t.match(column(films, 'moods').type, { element: { name: 'mood', enumLabels: ['happy', 'sad', 'meh'] } });
    t.same(
      ['extra', 'search', 'poster', 'spot', 'big', 'length_minutes', 'released', 'available', 'film_id'].map(
        (name) => column(films, name).type.name,
      ),
      ['jsonb', 'tsvector', 'bytea', 'point', 'int8', 'int2', 'date', 'bool', 'uuid'],
    );
    const spans = relation(model, 'shop', 'spans');
    t.match(column(spans, 'during').type, { name: 'interval', precision: 3 });
    t.match(column(spans, 'at').type, { name: 'time', precision: 2 });
    t.match(column(spans, 'bits').type, { name: 'bit', length: 4 });
    const viewColumns = relation(model, 'shop', 'film_titles').columns;
    t.not(viewColumns.length, 0, 'the view has columns');
    t.same(
      viewColumns.filter((c) => !c.nullable).map((c) => c.name),
      [],
      "a view's columns are nullable: the catalog does not know",
    );
  });

  t.test('keys: primary (uuid, text, composite, mixed case, partitioned), unique not-null, none', async (t) => {
    t.same(relation(model, 'shop', 'films').primaryKey, { name: 'films_pkey', columns: ['film_id'] });
    t.same(relation(model, 'shop', 'film_actor').primaryKey?.columns, ['actor_id', 'film_id']);
    t.same(relation(model, 'shop', 'payments').primaryKey?.columns, ['paid_at', 'payment_id']);
    t.same(relation(model, 'Music', 'Album').primaryKey?.columns, ['AlbumId']);
    const countries = relation(model, 'shop', 'countries');
    t.same(countries.primaryKey?.columns, ['code']);
    t.same(countries.uniqueKeys, [{ name: 'countries_name_key', columns: ['name'] }], 'the unique nullable capital is no key');
    const ledger = relation(model, 'shop', 'ledger');
    t.equal(ledger.primaryKey, undefined);
    t.same(ledger.uniqueKeys, [{ name: 'ledger_account_ref', columns: ['account', 'ref'] }]);
    t.same(relation(model, 'shop', 'film_counts').uniqueKeys, [], "a materialized view's unique index on a nullable column is no key");
    t.equal(relation(model, 'shop', 'notes').primaryKey, undefined);
    t.same(relation(model, 'shop', 'film_titles').uniqueKeys, []);
  });

  t.test('indexes: btree only, directions and NULLS order, partial, expression and pattern ones unusable', async (t) => {
    const films = relation(model, 'shop', 'films');
    const byName = Object.fromEntries(films.indexes.map((index) => [index.name, index]));
    t.notOk(byName.films_tags_idx, 'a gin index is left out');
    t.match(byName.films_pkey, { unique: true, primary: true, usable: true, columns: [{ column: 'film_id' }] });
    t.same(byName.films_released_idx?.columns, [
      { column: 'released', descending: true, nullsFirst: false, ordersAsColumn: true },
      { column: 'film_id', descending: true, nullsFirst: true, ordersAsColumn: true },
    ]);
    t.match(byName.films_available_idx, { partial: true, usable: false });
    t.match(byName.films_upper_title_idx, {
      usable: false,
      columns: [{ column: undefined, expression: 'upper(title)' }, { column: 'film_id' }],
    });
    t.match(byName.films_title_pattern_idx, { usable: false, columns: [{ column: 'title', ordersAsColumn: false }] });
    t.match(byName.films_title_idx, { usable: true, unique: false, partial: false });
    t.same(
      relation(model, 'Music', 'Album').indexes.map((index) => [index.name, index.columns.map((c) => c.column)]),
      [
        ['Album_pkey', ['AlbumId']],
        ['IFK_AlbumArtistId', ['ArtistId', 'AlbumId']],
      ],
    );
    t.same(
      relation(model, 'shop', 'payments').indexes.map((index) => index.name),
      ['payments_pkey'],
      "a partitioned table's own index",
    );
  });
});

t.test("schemas: only those asked for; never PostgreSQL's own nor the service's", async (t) => {
  const database = await testDatabase(t);
  await makeFixture(database);
  await database.sql.unsafe(`create schema ${SERVICE}; create table ${SERVICE}.rate_tiers (id int primary key)`);
  const music = await readCatalog(database.sql, {
    schemas: ['Music', 'pg_catalog', 'information_schema', SERVICE],
    serviceSchema: SERVICE,
  });
  t.same(
    music.relations.map((r) => `${r.schema}.${r.name}`),
    ['Music.Album'],
  );
  const all = await readCatalog(database.sql, { serviceSchema: SERVICE });
  const schemas = new Set(all.relations.map((r) => r.schema));
  t.ok(schemas.has('shop') && schemas.has('Music') && schemas.has('demo'), 'every schema of the database');
  t.notOk(schemas.has(SERVICE) || schemas.has('pg_catalog') || schemas.has('information_schema'), 'but these');
  t.same(
    await readCatalog(database.sql, { schemas: ['nothing_here'], serviceSchema: SERVICE }),
    { relations: [] },
    'no such schema: nothing',
  );
});

t.test('a role that may read two columns of films: every column is read, each marked', async (t) => {
  const database = await testDatabase(t);
  await makeFixture(database);
  const reader = await readOnlyClient(t, database);
  const model = await readCatalog(reader, { schemas: ['shop', 'Music'], serviceSchema: SERVICE });
  const films = relation(model, 'shop', 'films');
  t.same(
    films.columns.filter((c) => c.selectable).map((c) => c.name),
    ['film_id', 'title'],
  );
  t.equal(films.columns.length, 19, 'the others too, unlike information_schema');
  const countries = relation(model, 'shop', 'countries').columns;
  t.not(countries.length, 0, 'countries has columns');
  t.same(
    countries.filter((c) => !c.selectable).map((c) => c.name),
    [],
    'a table granted whole',
  );
  const album = relation(model, 'Music', 'Album').columns;
  t.not(album.length, 0, 'Album has columns');
  t.same(
    album.filter((c) => c.selectable).map((c) => c.name),
    [],
    'a schema without USAGE: nothing',
  );
  t.same(relation(model, 'shop', 'films').primaryKey?.columns, ['film_id'], 'keys and indexes all the same');
});
