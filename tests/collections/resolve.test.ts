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
    t.same(problems(seen, 'collections: [{relation: shop.films, columns: [film_id, title], access: {rows: {rating: mood}}}]'), [
      "Invalid collections file collections.yaml, collection films: access.rows column rating: the role may not SELECT it, which the rule's condition needs; grant it",
    ]);
    t.same(
      only(catalog, 'collections: [{relation: shop.films, columns: [film_id, title], access: {rows: {rating: mood}}}]').order.index,
      'films_rating_idx',
      'with the grant: a rule on an enum, served by (rating, film_id)',
    );
  });
});

t.test('access: row rules, and the indexes that serve a collection with them', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(`
    create schema saas;
    create table saas.orders (
      tenant_id int not null,
      id bigint not null,
      created_at timestamptz not null,
      status text not null,
      total numeric(10, 2),
      primary key (tenant_id, id)
    );
    create index orders_tenant_created_idx on saas.orders (tenant_id, created_at, id);
    -- Ends with the key (tenant_id, id): serves a sort by created_at over every tenant, not within one.
    create index orders_created_idx on saas.orders (created_at, tenant_id, id);
    create table saas.events (
      id bigint primary key,
      tenant_id uuid not null,
      org text,
      "Region" text,
      at timestamptz not null,
      kind text,
      payload jsonb,
      flag boolean,
      score double precision
    );
    create index events_tenant_idx on saas.events (tenant_id);
    create index events_kind_idx on saas.events (kind, id);
    create index events_org_tenant_idx on saas.events (org, tenant_id, id);
    create index events_org_tenant_kind_idx on saas.events (tenant_id, org, kind);
  `);
  const catalog = await readCatalog(database.sql, { schemas: ['saas'], serviceSchema: 'service' });
  const line = (collection: string, problem: string) => `Invalid collections file collections.yaml, collection ${collection}: ${problem}`;

  t.test('without access: everyone reads every row', async (t) => {
    t.same(only(catalog, 'collections: [{relation: saas.orders}]').access, { anonymous: true, rows: [] });
    t.same(only(catalog, 'collections: [{relation: saas.orders, access: {anonymous: false}}]').access, { anonymous: false, rows: [] });
    t.equal(
      only(catalog, 'collections: [{relation: saas.orders, sort: [created_at]}]').sorts.created_at?.index,
      'orders_created_idx',
      'over every tenant, the index that ends with the key',
    );
  });

  t.test('a rule on a served column: the catalog column and the claim path; orders served with it leading', async (t) => {
    const orders = only(
      catalog,
      'collections: [{relation: saas.orders, sort: [created_at], access: {rows: {tenant_id: app_metadata.tenant}}}]',
    );
    t.equal(orders.access.anonymous, false, 'never read anonymously');
    t.same(
      orders.access.rows.map((rule) => [rule.column.name, rule.column.type.name, rule.claim]),
      [['tenant_id', 'int4', ['app_metadata', 'tenant']]],
    );
    t.equal(orders.access.rows[0]!.column, catalog.relations.find((r) => r.name === 'orders')!.columns[0], 'the catalog column');
    t.equal(orders.order.index, 'orders_pkey', 'the key (tenant_id, id): one tenant in key order');
    t.equal(orders.sorts.created_at?.index, 'orders_tenant_created_idx', 'tenant_id leading, then created_at and the key');
    t.same(orders.cost.indexed, { tenant_id: 10_000, created_at: 1_000 }, "a tenant's read priced by the index that serves it");
  });

  t.test('a rule on a column not served; no index with it leading: a problem that says what to create', async (t) => {
    const file = (settings: string) => `collections: [{relation: saas.events, columns: [id, at, kind], ${settings}}]`;
    t.same(problems(catalog, file('access: {rows: {tenant_id: tenant}}')), [
      line(
        'events',
        "the default order: no btree index serves it with the row rule's tenant_id leading (tenant_id, then id); create index on saas.events (tenant_id, id), or accept it with unindexedSorts: true",
      ),
    ]);
    t.same(problems(catalog, file('order: [-at, kind], access: {rows: {tenant_id: tenant}}')), [
      line(
        'events',
        "the default order: no btree index serves it with the row rule's tenant_id leading (tenant_id, then -at, kind, id); create index on saas.events (tenant_id, at, kind desc, id desc), or accept it with unindexedSorts: true",
      ),
    ]);
    t.same(problems(catalog, file('variants: [time], timeColumn: at, sort: [kind], access: {rows: {tenant_id: tenant}}')), [
      line(
        'events',
        "sort by kind: no btree index serves it with the row rule's tenant_id leading (tenant_id, then kind, id); create index on saas.events (tenant_id, kind, id), or accept it with unindexedSorts: true",
      ),
      line(
        'events',
        "the default order: no btree index serves it with the row rule's tenant_id leading (tenant_id, then id); create index on saas.events (tenant_id, id), or accept it with unindexedSorts: true",
      ),
      line(
        'events',
        "the time variant's order by at: no btree index serves it with the row rule's tenant_id leading (tenant_id, then at, id); create index on saas.events (tenant_id, at, id), or accept it with unindexedSorts: true",
      ),
    ]);
    t.same(
      problems(catalog, file('sort: [kind]')),
      [],
      'without the rule, events_kind_idx serves kind and the primary key the default order',
    );
    const events = only(catalog, file('unindexedSorts: true, access: {rows: {tenant_id: tenant}}'));
    t.same(
      events.fields.map((field) => field.name),
      ['id', 'at', 'kind'],
      'tenant_id is not served',
    );
    t.same(
      events.access.rows.map((rule) => [rule.column.name, rule.claim]),
      [['tenant_id', ['tenant']]],
    );
    t.equal(events.order.index, undefined);
    t.same(events.cost.indexed, {}, 'no index serves a tenant: every order priced as unindexed');
    t.same(events.filters, {}, 'no index leads with tenant_id, then a served column');
    t.same(Object.keys(only(catalog, file('')).filters), ['id', 'kind'], 'without the rule: eq on the columns that lead an index');
  });

  t.test('two rule columns: an index leading with both, in either order', async (t) => {
    for (const rows of ['{org: org, tenant_id: tenant}', '{tenant_id: tenant, org: org}']) {
      const events = only(catalog, `collections: [{relation: saas.events, columns: [id, org, kind], access: {rows: ${rows}}}]`);
      t.equal(events.order.index, 'events_org_tenant_idx', rows);
      t.same(events.filters, { id: ['eq'], org: ['eq'], kind: ['eq'] }, `${rows}: eq on a rule column, and on id and kind after both`);
      t.same(
        events.access.rows.map((rule) => rule.column.name),
        rows.startsWith('{org') ? ['org', 'tenant_id'] : ['tenant_id', 'org'],
      );
    }
  });

  t.test('bad rules: one line each', async (t) => {
    const cases: [string, string[]][] = [
      ['{rows: {tenant: tenant}}', [line('events', 'access.rows column tenant: no such column in saas.events')]],
      ['{rows: {region: tenant}}', [line('events', 'access.rows column region: no such column in saas.events (did you mean Region?)')]],
      [
        '{rows: {payload: tenant}}',
        [
          line(
            'events',
            "access.rows column payload is of type jsonb, which no claim can equal: a row rule's column is text, an integer, a numeric, a uuid or an enum",
          ),
        ],
      ],
      [
        '{rows: {flag: tenant, at: tenant}}',
        [
          line(
            'events',
            "access.rows column flag is of type boolean, which no claim can equal: a row rule's column is text, an integer, a numeric, a uuid or an enum",
          ),
          line(
            'events',
            "access.rows column at is of type timestamp with time zone, which no claim can equal: a row rule's column is text, an integer, a numeric, a uuid or an enum",
          ),
        ],
      ],
      [
        '{rows: {score: tenant}}',
        [
          line(
            'events',
            "access.rows column score is of type double precision, which no claim can equal: a row rule's column is text, an integer, a numeric, a uuid or an enum",
          ),
        ],
      ],
      [
        '{anonymous: true, rows: {org: org, tenant_id: tenant}}',
        [
          line(
            'events',
            'access.anonymous is true beside access.rows: a collection with rows is never read anonymously; leave anonymous out',
          ),
        ],
      ],
    ];
    for (const [access, expected] of cases) {
      t.same(problems(catalog, `collections: [{relation: saas.events, unindexedSorts: true, access: ${access}}]`), expected, access);
    }
  });
});

t.test('warnings: a served column named as a secret, a collection without a columns list', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(`
    create table public.users (
      id int primary key,
      email text not null,
      password_hash text,
      "apiToken" uuid,
      tokens_used int,
      password_changed_at timestamptz
    );
  `);
  const catalog = await readCatalog(database.sql, { schemas: ['public'], serviceSchema: 'service' });
  const warning = (text: string) => `Warning: collections file collections.yaml, collection users: ${text}`;
  t.same(resolve(catalog, 'collections: [{relation: public.users}]').warnings, [
    warning(
      'no columns list: it serves every column of public.users, and any column added to it once the catalog is read again; list the columns to serve',
    ),
    warning('column password_hash is served, and its name says it holds a secret (password): leave it out unless every client may read it'),
    warning('column apiToken is served, and its name says it holds a secret (token): leave it out unless every client may read it'),
  ]);
  t.same(resolve(catalog, 'collections: [{relation: public.users, columns: [id, email, tokens_used, password_changed_at]}]').warnings, []);
  t.same(
    resolve(catalog, 'collections: [{relation: public.users, columns: [id, nope]}]').warnings,
    [],
    'none for a collection that cannot be served',
  );
});
