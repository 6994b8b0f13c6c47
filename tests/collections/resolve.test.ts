// A collections file against the fixture's catalog: what it leaves unsaid derived, and each problem one line.
import t from 'tap';
import type { CatalogModel } from '../../lib/catalog/model.ts';
import { readCatalog } from '../../lib/catalog/read.ts';
import type { Collection } from '../../lib/collections/model.ts';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';
import { type Resolution, resolveCollections } from '../../lib/collections/resolve.ts';
import { makeFixture, readOnlyClient } from '../catalog/fixture.ts';
import { testDatabase } from '../helpers/db.ts';

const FILE = 'collections.yaml';

function resolve(catalog: CatalogModel, yaml: string): Resolution {
  return resolveCollections(parseCollectionsFile(yaml, FILE), catalog, FILE);
}

function only(catalog: CatalogModel, yaml: string): Collection {
  const { collections, problems } = resolve(catalog, yaml);
  if (problems.length > 0 || collections.length !== 1) throw new Error(`Test: ${problems.join('\n')}`);
  return collections[0]!;
}

function problems(catalog: CatalogModel, yaml: string): readonly string[] {
  return resolve(catalog, yaml).problems;
}

t.test('files against the fixture', async (t) => {
  const database = await testDatabase(t);
  await makeFixture(database);
  const catalog = await readCatalog(database.sql, { schemas: ['shop', 'Music'], serviceSchema: 'service' });

  t.test('a table named alone: columns, key, sorts, filters, variants, order and cost derived', async (t) => {
    const films = only(catalog, 'collections: [{relation: shop.films}]');
    t.equal(films.name, 'films');
    t.same(
      films.fields.map((field) => [field.name, field.kind]),
      [
        ['film_id', 'uuid'],
        ['title', 'text'],
        ['rating', 'enum'],
        ['price', 'decimal'],
        ['bargain', 'decimal'],
        ['length_minutes', 'integer'],
        ['released', 'date'],
        ['updated_at', 'timestamp'],
        ['available', 'boolean'],
        ['tags', 'array'],
        ['scores', 'array'],
        ['moods', 'array'],
        ['extra', 'json'],
        ['search', 'tsvector'],
        ['secret', 'text'],
        ['big', 'integer'],
        ['seen_at', 'timestamptz'],
      ],
      'every column of a supported type: bytea and point left out',
    );
    t.same(films.key, { columns: ['film_id'], source: 'primary key' });
    t.same(
      Object.fromEntries(Object.entries(films.sorts).map(([column, served]) => [column, served.index])),
      { film_id: 'films_pkey', title: 'films_title_idx', rating: 'films_rating_idx' },
      'released: its index puts NULLs last descending, not where PostgreSQL does; big: its index ends before the key; updated_at: partial',
    );
    t.same(films.sorts.title?.order, [
      { column: 'title', descending: false },
      { column: 'film_id', descending: false },
    ]);
    t.same(
      Object.keys(films.filters),
      ['film_id', 'title', 'rating', 'released', 'updated_at', 'big'],
      'eq on every column leading a btree index',
    );
    t.same(films.variants, ['offset', 'page', 'cursor']);
    t.equal(films.defaultVariant, 'cursor');
    t.same(films.order, { order: [{ column: 'film_id', descending: false }], index: 'films_pkey' });
    t.same(films.pageSize, { default: 20, max: 100 });
    t.equal(films.countThreshold, 10_000);
    t.same(films.cost, {
      itemsPerUnit: 50,
      countedPerUnit: 5_000,
      indexed: { film_id: 10_000, title: 1_000, rating: 1_000 },
      unindexedSort: 1,
    });
  });

  t.test('composite, mixed-case, partitioned and unique keys; camelCase', async (t) => {
    const actors = only(catalog, 'collections: [{relation: shop.film_actor}]');
    t.same(actors.key.columns, ['actor_id', 'film_id']);
    t.same(Object.fromEntries(Object.entries(actors.sorts).map(([column, served]) => [column, served.index])), {
      actor_id: 'film_actor_pkey',
      film_id: 'film_actor_film_idx',
    });
    t.same(actors.cost.indexed, { actor_id: 10_000, film_id: 1_000 });

    const album = only(catalog, 'collections: [{relation: Music.Album, name: albums, fieldNames: camelCase, filters: {Title: [prefix]}}]');
    t.same(
      album.fields.map((field) => [field.column.name, field.name]),
      [
        ['AlbumId', 'albumId'],
        ['Title', 'title'],
        ['ArtistId', 'artistId'],
      ],
    );
    t.same(album.key, { columns: ['AlbumId'], source: 'primary key' });
    t.same(Object.keys(album.sorts), ['AlbumId', 'ArtistId']);
    t.same(album.filters, { Title: ['prefix'] });
    t.equal(only(catalog, 'collections: [{relation: \'"Music"."Album"\'}]').name, 'Album');

    const payments = only(
      catalog,
      'collections: [{relation: shop.payments, variants: [time, cursor], timeColumn: paid_at, order: -paid_at}]',
    );
    t.same(payments.key.columns, ['paid_at', 'payment_id']);
    t.equal(payments.relation.kind, 'partitioned table');
    t.same(payments.order, {
      order: [
        { column: 'paid_at', descending: true },
        { column: 'payment_id', descending: true },
      ],
      index: 'payments_pkey',
    });
    t.equal(payments.defaultVariant, 'cursor');
    t.equal(payments.timeColumn, 'paid_at');

    const ledger = only(catalog, 'collections: [{relation: shop.ledger}]');
    t.same(ledger.key, { columns: ['account', 'ref'], source: 'unique key' });
  });

  t.test('a view: with the key the file names, and its sorts accepted unindexed', async (t) => {
    const titles = only(catalog, 'collections: [{relation: shop.film_titles, key: [film_id], sort: [title], unindexedSorts: true}]');
    t.same(titles.key, { columns: ['film_id'], source: 'file' });
    t.same(titles.sorts.title?.index, undefined);
    t.equal(titles.cost.unindexedSort, 100, 'a view has no estimate');
    t.same(problems(catalog, 'collections: [{relation: shop.film_titles}]'), [
      'Invalid collections file collections.yaml, collection film_titles: a view has no key the catalog knows: name its columns with key',
    ]);
    t.same(problems(catalog, 'collections: [{relation: shop.film_titles, key: [film_id]}]'), [
      'Invalid collections file collections.yaml, collection film_titles: the default order: no btree index serves it (film_id); add one, or accept it with unindexedSorts: true',
    ]);
  });

  t.test('a materialized view not populated: a problem until it is refreshed', async (t) => {
    await database.sql.unsafe(
      'create materialized view shop.rating_counts as select rating, count(*) as films from shop.films group by rating with no data',
    );
    t.teardown(() => database.sql.unsafe('drop materialized view shop.rating_counts'));
    const file = 'collections: [{relation: shop.rating_counts, key: [rating], unindexedSorts: true}]';
    const before = await readCatalog(database.sql, { schemas: ['shop'], serviceSchema: 'service' });
    t.same(problems(before, file), [
      'Invalid collections file collections.yaml, collection rating_counts: shop.rating_counts is a materialized view that has not been populated: REFRESH MATERIALIZED VIEW it first',
    ]);
    await database.sql.unsafe('refresh materialized view shop.rating_counts');
    const after = await readCatalog(database.sql, { schemas: ['shop'], serviceSchema: 'service' });
    t.same(problems(after, file), []);
    t.equal(
      catalog.relations.find((relation) => relation.name === 'film_counts')?.populated,
      true,
      'a materialized view made with its data is populated',
    );
  });

  t.test('overrides: page sizes, count threshold, cost', async (t) => {
    const films = only(
      catalog,
      `collections:
  - relation: shop.films
    name: movies
    columns: [film_id, title, released]
    sort: [title, released]
    unindexedSorts: true
    order: [-released, title]
    pageSize: {max: 10}
    countThreshold: 0
    cost: {itemsPerUnit: 10, indexed: {title: 5}, unindexedSort: 7}`,
    );
    t.equal(films.name, 'movies');
    t.same(films.pageSize, { default: 10, max: 10 });
    t.equal(films.countThreshold, 0);
    // The key's own order is priced along its primary key index, though the file sorts by other columns only.
    t.same(films.cost, { itemsPerUnit: 10, countedPerUnit: 5_000, indexed: { film_id: 10_000, title: 5 }, unindexedSort: 7 });
    t.equal(films.sorts.released?.index, undefined);
    t.same(films.filters, { film_id: ['eq'], title: ['eq'], released: ['eq'] });
  });

  t.test('bad files: one line per problem, naming file, collection and problem', async (t) => {
    const line = (collection: string, problem: string) => `Invalid collections file collections.yaml, collection ${collection}: ${problem}`;
    const cases: [string, string[]][] = [
      [
        '{relation: shop.Films}',
        [line('Films', 'no relation shop."Films" in the database, or in the schemas read (did you mean shop.films?)')],
      ],
      [
        '{relation: Music.album}',
        [line('album', 'no relation "Music".album in the database, or in the schemas read (did you mean "Music"."Album"?)')],
      ],
      [
        '{relation: shop.payments_2024}',
        [line('payments_2024', 'shop.payments_2024 is a partition of shop.payments: serve the partitioned table')],
      ],
      ['{relation: "a.b.c"}', [line('#1', 'relation a.b.c must be a name or schema.name, a part double-quoted where it holds a dot')]],
      ['{relation: shop.notes}', [line('notes', 'it has no primary key nor unique key over NOT NULL columns: name one with key')]],
      [
        '{relation: shop.films, columns: [film_id, Title]}',
        [line('films', 'column Title: no such column in shop.films (did you mean title?)')],
      ],
      [
        '{relation: shop.films, columns: [film_id, spot]}',
        [line('films', 'column spot is of type point, which the service does not serve')],
      ],
      ['{relation: shop.films, columns: [title]}', [line('films', 'key column film_id is not among the columns served')]],
      ['{relation: shop.films, key: [secret]}', [line('films', "key column secret is nullable: a key's columns must be NOT NULL")]],
      ['{relation: shop.films, key: [extra]}', [line('films', 'key column extra is of type jsonb, which cannot be a key')]],
      [
        '{relation: shop.films, filters: {released: [eq, prefix], extra: [eq], tags: [isnull], search: [eq], available: [lt]}}',
        [
          line('films', 'filter released: prefix is not meaningful for type date, which takes eq, ne, lt, lte, gt, gte, in, isnull'),
          line('films', 'filter extra: eq is not meaningful for type jsonb, which takes no filters'),
          line('films', 'filter tags: isnull is not meaningful for type text[], which takes no filters'),
          line('films', 'filter search: eq is not meaningful for type tsvector, which takes no filters'),
          line('films', 'filter available: lt is not meaningful for type boolean, which takes eq, ne, isnull'),
        ],
      ],
      ['{relation: shop.films, filters: {nope: [eq]}}', [line('films', 'filter column nope: no such column in shop.films')]],
      [
        '{relation: shop.films, sort: [big, released, extra]}',
        [
          line('films', 'sort by big: no btree index serves it (big, film_id); add one, or accept it with unindexedSorts: true'),
          line('films', 'sort by released: no btree index serves it (released, film_id); add one, or accept it with unindexedSorts: true'),
          line('films', 'sort column extra is of type jsonb, which has no order to page by'),
        ],
      ],
      [
        '{relation: shop.films, order: -updated_at}',
        [
          line(
            'films',
            'the default order: no btree index serves it (-updated_at, -film_id); add one, or accept it with unindexedSorts: true',
          ),
        ],
      ],
      ['{relation: shop.films, variants: [time]}', [line('films', 'the time variant needs a timeColumn')]],
      [
        '{relation: shop.films, variants: [time], timeColumn: released}',
        [line('films', 'timeColumn released is of type date, not a timestamp')],
      ],
      [
        '{relation: shop.payments, variants: [time, cursor], defaultVariant: time, timeColumn: paid_at}',
        [
          line(
            'payments',
            'the cursor variant cannot be started beside a default time variant without a key of one integer column (since_id): drop it, or make it the default',
          ),
        ],
      ],
      // The same with a uuid key (the demo's events, with an integer key, are served so: tests/db/demo-catalog.test.ts).
      [
        '{relation: shop.films, variants: [time, cursor], defaultVariant: time, timeColumn: updated_at, unindexedSorts: true}',
        [
          line(
            'films',
            'the cursor variant cannot be started beside a default time variant without a key of one integer column (since_id): drop it, or make it the default',
          ),
        ],
      ],
      [
        '{relation: shop.films, variants: [offset], defaultVariant: page}',
        [line('films', 'the default variant page is not among the variants')],
      ],
      ['{relation: shop.films, pageSize: {default: 500}, name: f}', []],
      ['{relation: shop.films, pageSize: {default: 50, max: 10}}', [line('films', 'pageSize.default 50 is over pageSize.max 10')]],
      ['{relation: shop.films, name: keys}', [line('keys', 'the name keys is reserved')]],
    ];
    for (const [entry, expected] of cases) t.same(problems(catalog, `collections: [${entry}]`), expected, entry);
    t.same(problems(catalog, 'collections: [{relation: shop.countries}, {relation: shop.films, name: countries}]'), [
      line('countries', 'the name countries is taken by an earlier collection'),
    ]);
    const { collections, problems: found } = resolve(catalog, 'collections: [{relation: shop.countries}, {relation: shop.nothing}]');
    t.same(
      collections.map((c) => c.name),
      ['countries'],
      'the good collections are resolved beside the problems',
    );
    t.equal(found.length, 1);
  });

  t.test('a role that may read two columns of films', async (t) => {
    const reader = await readOnlyClient(t, database);
    const seen = await readCatalog(reader, { schemas: ['shop'], serviceSchema: 'service' });
    const lines = problems(seen, 'collections: [{relation: shop.films}]');
    t.equal(lines.length, 15, 'every column but film_id and title, by name');
    t.equal(
      lines[0],
      'Invalid collections file collections.yaml, collection films: column rating: the role may not SELECT it; grant it, or list the columns to serve',
    );
    t.same(problems(seen, 'collections: [{relation: shop.films, columns: [film_id, title, secret]}]'), [
      'Invalid collections file collections.yaml, collection films: column secret: the role may not SELECT it; grant it, or leave it out',
    ]);
    t.same(only(seen, 'collections: [{relation: shop.films, columns: [film_id, title]}]').fields.length, 2);
  });
});
