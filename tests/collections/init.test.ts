// init against the fixture: a starting file the service accepts as it is, with views and tables without a key commented
// out, no key guessed, and what it leaves out said.
import t from 'tap';
import type { CatalogModel } from '../../lib/catalog/model.ts';
import { readCatalog } from '../../lib/catalog/read.ts';
import { initFile } from '../../lib/collections/init.ts';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';
import { resolveCollections } from '../../lib/collections/resolve.ts';
import { makeFixture, readOnlyClient } from '../catalog/fixture.ts';
import { testDatabase } from '../helpers/db.ts';

function resolved(catalog: CatalogModel, text: string) {
  return resolveCollections(parseCollectionsFile(text, 'init.yaml'), catalog, 'init.yaml');
}

/** The file with its commented-out entries uncommented (the lines init wrote as `  # - relation:` and what follows them). */
function uncommented(text: string): string {
  let inEntry = false;
  return text
    .split('\n')
    .map((line) => {
      if (line.startsWith('  # - relation:')) inEntry = true;
      else if (!line.startsWith('  #   ')) inEntry = false;
      return inEntry ? `  ${line.slice(4)}` : line;
    })
    .join('\n');
}

t.test('init over the fixture', async (t) => {
  const database = await testDatabase(t);
  await makeFixture(database);
  const catalog = await readCatalog(database.sql, { schemas: ['shop', 'Music'], serviceSchema: 'service' });
  const text = initFile(catalog);
  t.equal(initFile(catalog), text, 'the same catalog, the same file');

  t.test('the file is served as it is: every table with a usable key', async (t) => {
    const { collections, problems } = resolved(catalog, text);
    t.same(problems, []);
    t.same(
      collections.map((collection) => collection.name),
      ['Album', 'countries', 'film_actor', 'films', 'ledger', 'payments', 'spans'],
      'no partitions, no views, not notes (no key)',
    );
    t.ok(text.startsWith('# yaml-language-server: $schema=docs/collections.schema.json\n'));
    t.match(
      text,
      [
        '  # - relation: shop.notes',
        '  #   columns: [body]',
        '  #   variants: [offset, page, cursor]',
        '  #   defaultVariant: cursor',
        '  #   # no key: no primary key nor unique key over NOT NULL columns; add key: [the columns that identify a row], then uncomment',
        '',
      ].join('\n'),
      'a table without a key: commented out, no key guessed, what to add said',
    );
  });

  t.test("a table's entry: its columns as they are, sorts an index serves, eq on index-leading columns, cursor by default", async (t) => {
    const start = text.indexOf('  - relation: shop.films\n');
    const entry = text.slice(start, text.indexOf('\n  - ', start + 1));
    t.equal(
      entry,
      [
        '  - relation: shop.films',
        '    columns: [film_id, title, rating, price, bargain, length_minutes, released, updated_at, available, tags, scores, moods, extra, search, big, seen_at]',
        '    sort: [film_id, title, rating]',
        '    filters:',
        '      film_id: [eq]',
        '      title: [eq]',
        '      rating: [eq]',
        '      released: [eq]',
        '      updated_at: [eq]',
        '      big: [eq]',
        '    variants: [offset, page, cursor]',
        '    defaultVariant: cursor',
        '    # not sort keys: released, updated_at, big (they lead an index, but none that serves their order then the key: see docs/reference/collections-file.md)',
        '    # left out: secret (its name says it holds a secret: secret; list it in columns to serve it)',
        '    # left out: poster (bytea, not served unless listed)',
        '    # left out: spot (point, not served)',
      ].join('\n'),
    );
    t.match(text, `  - relation: '"Music"."Album"'\n    columns: [AlbumId, Title, ArtistId]\n    sort: [AlbumId, ArtistId]\n`);
  });

  t.test('views: a key only from a unique index, else none and what to add; served once the key is added', async (t) => {
    t.match(
      text,
      [
        '  # - relation: shop.film_titles',
        '  #   columns: [film_id, title, released]',
        '  #   unindexedSorts: true',
        '  #   variants: [offset, page, cursor]',
        '  #   defaultVariant: cursor',
        '  #   # no key: a view has none the catalog knows; add key: [the columns that identify a row], then uncomment',
        '',
      ].join('\n'),
    );
    t.notMatch(text, /#\s+key: \[film_id\]/, 'no guessed key: film_id is only the first column');
    // A materialized view's unique index is a key.
    t.match(text, '  # - relation: shop.film_counts\n  #   columns: [rating, films]\n  #   key: [rating]\n');
    t.notMatch(text, 'no key: a materialized view', 'and its entry asks for none');
    const { collections, problems } = resolved(catalog, uncommented(text));
    t.same(
      problems,
      [
        'Invalid collections file init.yaml, collection film_titles: a view has no key the catalog knows: name its columns with key',
        'Invalid collections file init.yaml, collection notes: it has no primary key nor unique key over NOT NULL columns: name one with key',
      ],
      'uncommented as they are, those without a key are refused',
    );
    t.same(
      collections.filter((c) => c.relation.kind !== 'table' && c.relation.kind !== 'partitioned table').map((c) => c.name),
      ['film_counts'],
    );
    const keyed = uncommented(text).replace(
      '    columns: [film_id, title, released]\n',
      '    columns: [film_id, title, released]\n    key: [film_id]\n',
    );
    const added = resolved(catalog, keyed);
    t.same(
      added.problems,
      [
        'Invalid collections file init.yaml, collection notes: it has no primary key nor unique key over NOT NULL columns: name one with key',
      ],
      'with a key added, the view is served',
    );
    t.ok(added.collections.some((c) => c.name === 'film_titles' && c.key.source === 'file'));
  });

  t.test('a materialized view not populated: its entry says to refresh it', async (t) => {
    await database.sql.unsafe('create schema later; create materialized view later.counts as select 1 as n with no data');
    t.teardown(() => database.sql.unsafe('drop schema later cascade'));
    const file = initFile(await readCatalog(database.sql, { schemas: ['later'], serviceSchema: 'service' }));
    t.match(file, '  # - relation: later.counts\n');
    t.match(file, '  #   # not populated: REFRESH MATERIALIZED VIEW it before serving it\n');
  });

  t.test('names: the same relation name in two schemas, a name that is no collection name', async (t) => {
    await database.sql.unsafe(`
      create table public.films (id int primary key);
      create table "Music"."Play List" ("PlaylistId" int primary key, "Name" text);
      create table "Music".keys (id int primary key);
    `);
    const more = await readCatalog(database.sql, { schemas: ['shop', 'Music', 'public'], serviceSchema: 'service' });
    const file = initFile(more);
    const { collections, problems } = resolved(more, file);
    t.same(problems, []);
    const names = collections.map((c) => `${c.relation.schema}.${c.relation.name}=${c.name}`);
    const named = (name: string) => t.ok(names.includes(name), `${name} (of ${names.join(', ')})`);
    named('public.films=films');
    named('shop.films=shop_films'); // the second films is named by its schema
    named('Music.Play List=Play_List');
    named('Music.keys=Music_keys'); // keys is reserved
  });

  t.test("with a role that may read two of films' columns: they alone, and the file still serves", async (t) => {
    const reader = await readOnlyClient(t, database);
    const seen = await readCatalog(reader, { schemas: ['shop'], serviceSchema: 'service' });
    const file = initFile(seen);
    t.same(resolved(seen, file).problems, []);
    t.match(file, '  - relation: shop.films\n    columns: [film_id, title]\n');
    t.match(file, '    # left out: rating (the role may not SELECT it)');
  });
});

t.test('columns whose names say they hold a secret: left out, with the reason, and neither sorts nor filters', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(`
    create table public.users (
      id int primary key,
      email text not null unique,
      password_hash text not null,
      api_token text unique,
      "passwordHash" text,
      "refreshToken" uuid,
      salt text,
      tokens_used int not null default 0,
      api_key_id int,
      password_changed_at timestamptz
    );
    create index users_token_idx on public.users (api_token, id);
    create index users_salt_idx on public.users (salt);
    -- A table keyed by its secret is not served at all.
    create table public.sessions (token text primary key, user_id int not null);
  `);
  const catalog = await readCatalog(database.sql, { schemas: ['public'], serviceSchema: 'service' });
  const text = initFile(catalog);
  const start = text.indexOf('  - relation: public.users\n');
  t.equal(
    text.slice(start),
    [
      '  - relation: public.users',
      '    columns: [id, email, tokens_used, api_key_id, password_changed_at]',
      '    sort: [id]',
      '    filters:',
      '      id: [eq]',
      '      email: [eq]',
      '    variants: [offset, page, cursor]',
      '    defaultVariant: cursor',
      '    # not sort keys: email (they lead an index, but none that serves their order then the key: see docs/reference/collections-file.md)',
      '    # left out: password_hash (its name says it holds a secret: password; list it in columns to serve it)',
      '    # left out: api_token (its name says it holds a secret: token; list it in columns to serve it)',
      '    # left out: passwordHash (its name says it holds a secret: password; list it in columns to serve it)',
      '    # left out: refreshToken (its name says it holds a secret: token; list it in columns to serve it)',
      '    # left out: salt (its name says it holds a secret: salt; list it in columns to serve it)',
      '',
    ].join('\n'),
  );
  t.match(
    text,
    '  # public.sessions left out: its key column token cannot be served (left out: token (its name says it holds a secret: token; list it in columns to serve it))\n',
  );
  const { collections, problems, warnings } = resolved(catalog, text);
  t.same([collections.map((c) => c.name), problems, warnings], [['users'], [], []], 'served as it is, with nothing to warn of');
});

t.test('an empty catalog: a file of no collections, which says so', async (t) => {
  t.equal(
    initFile({ relations: [] }, { schema: 'collections.schema.json' }),
    "# yaml-language-server: $schema=collections.schema.json\n# A starting collections file, written by init from the database's catalog (docs/reference/collections-file.md).\ncollections:\n  []\n",
  );
});
