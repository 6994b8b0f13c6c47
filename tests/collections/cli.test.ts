// `npm run collections -- init | check` (scripts/collections.ts), run as the operator runs it: a child process over a test database.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { readCatalog } from '../../lib/catalog/read.ts';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';
import { resolveCollections } from '../../lib/collections/resolve.ts';
import { makeFixture } from '../catalog/fixture.ts';
import { runCollections as run } from '../helpers/collections-cli.ts';
import { testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';

t.test('init and check against a database', async (t) => {
  const database = await testDatabase(t);
  await makeFixture(database);
  const dir = t.testdir({});
  const env = { DATABASE_URL: database.url };
  const write = (name: string, text: string) => writeFileSync(path.join(dir, name), text);

  t.test("init's file resolves against the same database with no problems, and check accepts it", async (t) => {
    const init = await run(['init', '--schema', 'shop', '--schema', 'Music'], env, dir);
    t.same([init.code, init.stderr], [0, ''], 'nothing on stderr');
    t.ok(init.stdout.startsWith('# yaml-language-server: $schema='), 'nothing but the file on stdout');
    const catalog = await readCatalog(database.sql, { schemas: ['shop', 'Music'], serviceSchema: 'service' });
    const { collections, problems } = resolveCollections(parseCollectionsFile(init.stdout, 'init.yaml'), catalog, 'init.yaml');
    t.same(problems, []);
    t.same(
      collections.map((collection) => collection.name),
      ['Album', 'countries', 'film_actor', 'films', 'ledger', 'payments', 'spans'],
    );

    write('collections.yaml', init.stdout);
    const check = await run(['check', 'collections.yaml'], env, dir);
    t.same([check.code, check.stderr], [0, '']);
    t.equal(check.stdout.split('\n').at(-2), 'collections.yaml can be served: 7 collections');
    t.match(check.stdout, '\nfilms: shop.films (table), key film_id (primary key), variants offset, page, cursor (default)\n');
    t.match(check.stdout, '\n  sort title: index films_title_idx; an offset costs 1 unit per 1000 rows skipped\n');
    t.ok(check.stdout.startsWith('Album: "Music"."Album" (table), key AlbumId (primary key), variants offset, page, cursor (default)\n'));

    const fromEnv = await run(['check'], { ...env, COLLECTIONS: 'collections.yaml' }, dir);
    t.equal(fromEnv.stdout, check.stdout, 'COLLECTIONS names the file when no argument does');
  });

  t.test('init reads public unless told otherwise', async (t) => {
    await database.sql.unsafe('create table public.widgets (id bigint primary key, name text not null)');
    t.teardown(() => database.sql.unsafe('drop table public.widgets'));
    const init = await run(['init'], env, dir);
    t.same([init.code, init.stderr], [0, '']);
    t.match(init.stdout, '\n  - relation: public.widgets\n');
    t.notMatch(init.stdout, 'shop.', 'not the other schemas');
    write('public.yaml', init.stdout);
    const check = await run(['check', 'public.yaml'], env, dir);
    t.same([check.code, check.stderr], [0, '']);
  });

  t.test('init over a schema without a table it can serve: the file with its comments, and a line that says so', async (t) => {
    await database.sql.unsafe('create schema loose; create table loose.notes (body text)');
    const init = await run(['init', '--schema', 'loose'], env, dir);
    t.equal(init.code, 1);
    t.equal(
      init.stderr,
      'No table of schema loose has a usable key: the file lists no collection (its comments say why; --schema names others)\n',
    );
    t.match(
      init.stdout,
      '  # - relation: loose.notes\n  #   columns: [body]\n  #   variants: [offset, page, cursor]\n  #   defaultVariant: cursor\n' +
        '  #   # no key: no primary key nor unique key over NOT NULL columns; add key: [the columns that identify a row], then uncomment\n  []\n',
    );
  });

  t.test("check's report: the index serving each sort and filter, or what it costs without one", async (t) => {
    write(
      'films.yaml',
      [
        'collections:',
        '  - relation: shop.films',
        '    columns: [film_id, title, length_minutes, secret, updated_at]',
        '    sort: [title, length_minutes]',
        '    order: -title',
        '    filters: { title: [eq, in, prefix], secret: [eq], updated_at: [gte] }',
        '    unindexedSorts: true',
        '  - relation: shop.payments',
        '    variants: [time, cursor]',
        '    timeColumn: paid_at',
        '    pageSize: { default: 10, max: 50 }',
        '  - relation: shop.film_titles',
        '    key: [film_id]',
        '    unindexedSorts: true',
        '    sort: [title]',
      ].join('\n'),
    );
    const check = await run(['check', 'films.yaml'], env, dir);
    t.same(
      [check.code, check.stderr],
      [
        0,
        [
          'Warning: collections file films.yaml, collection films: column secret is served, and its name says it holds a secret (secret): leave it out unless every client may read it',
          'Warning: collections file films.yaml, collection payments: no columns list: it serves every column of shop.payments, and any column added to it once the catalog is read again; list the columns to serve',
          'Warning: collections file films.yaml, collection film_titles: no columns list: it serves every column of shop.film_titles, and any column added to it once the catalog is read again; list the columns to serve',
          '',
        ].join('\n'),
      ],
      'served all the same, with a warning line for each column named as a secret and each collection without a columns list',
    );
    t.equal(
      check.stdout,
      [
        'films: shop.films (table), key film_id (primary key), variants offset, page, cursor (default)',
        '  default order -title, -film_id: index films_title_idx; an offset costs 1 unit per 1000 rows skipped',
        '  sort title: index films_title_idx; an offset costs 1 unit per 1000 rows skipped',
        '  sort length_minutes: no index: every chunk reads and sorts the filtered rows, +1 unit',
        '  filter title eq, in: index films_title_idx',
        '  filter title prefix: index films_title_pattern_idx',
        '  filter secret eq: no index leads with it: each chunk tests rows along its order until its page is full, which the cost rule does not charge for',
        '  filter updated_at gte: no index leads with it (only the partial films_available_idx): each chunk tests rows along its order until its page is full, which the cost rule does not charge for',
        '  count: exact under 10000 filtered rows (estimated from there on), 1 unit per 5000 rows counted; a chunk costs 1 unit per 50 items',
        'payments: shop.payments (partitioned table), key paid_at, payment_id (primary key), variants time, cursor (default)',
        '  default order paid_at, payment_id: index payments_pkey; an offset costs 1 unit per 10000 rows skipped',
        '  sort paid_at: index payments_pkey; an offset costs 1 unit per 10000 rows skipped',
        '  time variant by paid_at: as the sort above',
        '  filter paid_at eq: index payments_pkey',
        '  count: exact under 10000 filtered rows (estimated from there on), 1 unit per 5000 rows counted; a chunk costs 1 unit per 50 items',
        'film_titles: shop.film_titles (view), key film_id (file), variants offset, page, cursor (default)',
        '  key: tested: no two rows share it, and it is never NULL',
        '  default order film_id: no index: every chunk reads and sorts the filtered rows, +100 units (no estimate of its rows: a view, or a table never analyzed)',
        '  sort title: no index: every chunk reads and sorts the filtered rows, +100 units (no estimate of its rows: a view, or a table never analyzed)',
        '  count: exact under 10000 filtered rows (estimated from there on), 1 unit per 5000 rows counted; a chunk costs 1 unit per 50 items',
        'films.yaml can be served: 3 collections',
        '',
      ].join('\n'),
    );
  });

  t.test('with row rules: which index serves each order and filter with the rule leading, and what to create', async (t) => {
    await database.sql.unsafe(`
      create schema saas;
      create table saas.orders (
        id bigint primary key,
        tenant_id int not null,
        created_at timestamptz not null,
        status text not null,
        code varchar(20),
        note text
      );
      create index orders_tenant_idx on saas.orders (tenant_id, id);
      create index orders_tenant_status_idx on saas.orders (tenant_id, status);
      create index orders_created_idx on saas.orders (created_at, id);
      analyze saas.orders;
    `);
    write(
      'saas.yaml',
      [
        'collections:',
        '  - relation: saas.orders',
        '    columns: [id, created_at, status, code, note]',
        '    variants: [cursor, time]',
        '    timeColumn: created_at',
        '    sort: [created_at]',
        '    order: -created_at',
        '    filters: { status: [eq, in], code: [eq, prefix], note: [prefix], id: [lt] }',
        '    unindexedSorts: true',
        '    access:',
        '      rows: { tenant_id: org.tenant }',
        '  - relation: saas.orders',
        '    name: all-orders',
        '    columns: [id, tenant_id, created_at]',
        '    filters: { tenant_id: [eq] }',
        '    access: { anonymous: false }',
      ].join('\n'),
    );
    const check = await run(['check', 'saas.yaml'], env, dir);
    t.same([check.code, check.stderr], [0, '']);
    t.equal(
      check.stdout,
      [
        'orders: saas.orders (table), key id (primary key), variants cursor (default), time',
        '  rows: tenant_id = claim org.tenant (never read anonymously); every index below leads with tenant_id',
        '  default order -created_at, -id: no index: every chunk reads and sorts the filtered rows, +1 unit',
        '    create index on saas.orders (tenant_id, created_at, id);',
        '  sort created_at: no index: every chunk reads and sorts the filtered rows, +1 unit',
        '    create index on saas.orders (tenant_id, created_at, id);',
        '  time variant by created_at: as the sort above',
        '  filter status eq, in: index orders_tenant_status_idx',
        '  filter code eq: no index leads with tenant_id, then it: each chunk tests rows along its order until its page is full, which the cost rule does not charge for',
        '    create index on saas.orders (tenant_id, code);',
        '  filter code prefix: no index of text_pattern_ops or the C collation leads with tenant_id, then it: each chunk tests rows along its order until its page is full, which the cost rule does not charge for',
        '    create index on saas.orders (tenant_id, code varchar_pattern_ops);',
        '  filter note prefix: no index of text_pattern_ops or the C collation leads with tenant_id, then it: each chunk tests rows along its order until its page is full, which the cost rule does not charge for',
        '    create index on saas.orders (tenant_id, note text_pattern_ops);',
        '  filter id lt: index orders_tenant_idx',
        '  count: exact under 10000 filtered rows (estimated from there on), 1 unit per 5000 rows counted; a chunk costs 1 unit per 50 items',
        'all-orders: saas.orders (table), key id (primary key), variants offset, page, cursor (default)',
        '  rows: every row, to clients with credentials only (no anonymous reads)',
        '  default order id: index orders_pkey; an offset costs 1 unit per 10000 rows skipped',
        '  sort id: index orders_pkey; an offset costs 1 unit per 10000 rows skipped',
        '  sort tenant_id: index orders_tenant_idx; an offset costs 1 unit per 1000 rows skipped',
        '  sort created_at: index orders_created_idx; an offset costs 1 unit per 1000 rows skipped',
        '  filter tenant_id eq: index orders_tenant_idx',
        '  count: exact under 10000 filtered rows (estimated from there on), 1 unit per 5000 rows counted; a chunk costs 1 unit per 50 items',
        'saas.yaml can be served: 2 collections',
        '',
      ].join('\n'),
    );

    write(
      'saas-strict.yaml',
      'collections:\n  - relation: saas.orders\n    columns: [id, created_at]\n    sort: [created_at]\n    access: { rows: { tenant_id: tenant } }\n',
    );
    const strict = await run(['check', 'saas-strict.yaml'], env, dir);
    t.same(strict, {
      code: 1,
      stdout: '',
      stderr: [
        "Invalid collections file saas-strict.yaml, collection orders: sort by created_at: no btree index serves it with the row rule's tenant_id leading (tenant_id, then created_at, id); create index on saas.orders (tenant_id, created_at, id), or accept it with unindexedSorts: true",
        'saas-strict.yaml cannot be served: 1 problem',
        '',
      ].join('\n'),
    });
  });

  t.test('check tests a key the file names that no unique index vouches for, when it can count the rows', async (t) => {
    await database.sql.unsafe(`
      create schema tenancy;
      create table tenancy.usage (id int primary key, tenant_id int not null, day date not null, amount int not null);
      insert into tenancy.usage select n, n % 50, date '2024-01-01' + n / 100, n from generate_series(0, 4999) n;
      create index usage_tenant_idx on tenancy.usage (tenant_id, id);
      create view tenancy.usage_v as select * from tenancy.usage;
      create view tenancy.sparse as select id, case when id % 1000 = 0 then null else id end as ref from tenancy.usage;
      create view tenancy.huge as select n as id from generate_series(1, 2000000) n;
      analyze tenancy.usage;
    `);
    write(
      'tenancy.yaml',
      [
        'collections:',
        '  - relation: tenancy.usage_v',
        '    name: by-tenant',
        '    columns: [tenant_id, day, amount]',
        '    key: [tenant_id]',
        '    unindexedSorts: true',
        '  - relation: tenancy.usage',
        '    name: usage-days',
        '    columns: [tenant_id, day, amount]',
        '    key: [tenant_id, day]',
        '    unindexedSorts: true',
        '  - relation: tenancy.usage_v',
        '    name: by-id',
        '    columns: [id, tenant_id]',
        '    key: [id]',
        '    unindexedSorts: true',
        '  - relation: tenancy.usage',
        '    name: by-tenant-and-id',
        '    columns: [id, tenant_id]',
        '    key: [tenant_id, id]',
        '  - relation: tenancy.sparse',
        '    columns: [id, ref]',
        '    key: [ref]',
        '    unindexedSorts: true',
        '  - relation: tenancy.huge',
        '    columns: [id]',
        '    key: [id]',
        '    unindexedSorts: true',
      ].join('\n'),
    );
    const check = await run(['check', 'tenancy.yaml'], env, dir);
    t.equal(check.code, 1);
    t.equal(
      check.stderr,
      [
        'Invalid collections file tenancy.yaml, collection by-tenant: key tenant_id is not unique: 5000 rows of tenancy.usage_v share 50 of its values (0: 100 rows, 1: 100 rows, 2: 100 rows, …); a key names the columns that identify a row',
        'Invalid collections file tenancy.yaml, collection usage-days: key tenant_id, day is not unique: 5000 rows of tenancy.usage share 2500 of its values ((0, 2024-01-01): 2 rows, (0, 2024-01-02): 2 rows, (0, 2024-01-03): 2 rows, …); a key names the columns that identify a row',
        "Invalid collections file tenancy.yaml, collection sparse: key ref is NULL in 5 rows of tenancy.sparse: a key's columns are never NULL",
        'tenancy.yaml cannot be served: 3 problems',
        '',
      ].join('\n'),
    );
    const keyLines = check.stdout
      .split('\n')
      .filter((line) => !line.startsWith('  ') || line.startsWith('  key:'))
      .filter((line) => line !== '');
    t.same(keyLines, [
      'by-tenant: tenancy.usage_v (view), key tenant_id (file), variants offset, page, cursor (default)',
      'usage-days: tenancy.usage (table), key tenant_id, day (file), variants offset, page, cursor (default)',
      'by-id: tenancy.usage_v (view), key id (file), variants offset, page, cursor (default)',
      '  key: tested: no two rows share it, and it is never NULL',
      // The primary key's index lies within the key: no test.
      'by-tenant-and-id: tenancy.usage (table), key tenant_id, id (file), variants offset, page, cursor (default)',
      'sparse: tenancy.sparse (view), key ref (file), variants offset, page, cursor (default)',
      'huge: tenancy.huge (view), key id (file), variants offset, page, cursor (default)',
      '  key: not tested for uniqueness: the planner estimates 2000000 rows, over the 1000000 check counts; walk counts the rows it misses',
    ]);
  });

  t.test('a bad file: each problem one line naming file and collection, exit code 1', async (t) => {
    write(
      'bad.yaml',
      [
        'collections:',
        '  - relation: shop.films',
        '    name: films',
        '    columns: [film_id, Title, length_minutes]',
        '    sort: [length_minutes]',
        '  - relation: shop.film_titles',
        '  - relation: shop.nowhere',
        '  - relation: shop.countries',
      ].join('\n'),
    );
    const check = await run(['check', 'bad.yaml'], env, dir);
    t.equal(check.code, 1);
    t.equal(
      check.stderr,
      [
        'Warning: collections file bad.yaml, collection countries: no columns list: it serves every column of shop.countries, and any column added to it once the catalog is read again; list the columns to serve',
        'Invalid collections file bad.yaml, collection films: column Title: no such column in shop.films (did you mean title?)',
        'Invalid collections file bad.yaml, collection films: sort by length_minutes: no btree index serves it (length_minutes, film_id); add one, or accept it with unindexedSorts: true',
        'Invalid collections file bad.yaml, collection film_titles: a view has no key the catalog knows: name its columns with key',
        'Invalid collections file bad.yaml, collection nowhere: no relation shop.nowhere in the database, or in the schemas read',
        'bad.yaml cannot be served: 4 problems',
        '',
      ].join('\n'),
    );
    t.match(check.stdout, /^countries: shop\.countries \(table\)/, 'the collections without problems are reported all the same');
    t.notMatch(check.stdout, 'can be served');

    write('broken.yaml', 'collections:\n  - relation: shop.films\n    sorts: [title]\n');
    const shape = await run(['check', 'broken.yaml'], env, dir);
    t.same(shape, {
      code: 1,
      stdout: '',
      stderr: 'Invalid collections file broken.yaml, collection films: sorts is not a setting\nbroken.yaml cannot be served: 1 problem\n',
    });
  });

  t.test('errors: one line on stderr, exit code 1, nothing on stdout', async (t) => {
    const port = await freePort();
    const refused = `postgres://postgres@127.0.0.1:${port}/nothing`;
    const cases: [string, string[], Record<string, string>, string][] = [
      ['no command', [], env, 'No command: expected init, check or walk (npm run --silent collections -- help)'],
      ['an unknown command', ['inti'], env, 'Unknown command "inti": expected init, check or walk (npm run --silent collections -- help)'],
      [
        'no DATABASE_URL',
        ['init'],
        {},
        'DATABASE_URL is not set: init reads the catalog of the database it names (DATABASE_URL=postgres://user@host:5432/dbname)',
      ],
      [
        'a DATABASE_URL that is no URL',
        ['init'],
        { DATABASE_URL: 'localhost' },
        'Invalid DATABASE_URL: expected a postgres:// or postgresql:// URL',
      ],
      [
        'connection refused',
        ['init'],
        { DATABASE_URL: refused },
        `Cannot read the catalog of 127.0.0.1:${port}/nothing: connection refused`,
      ],
      ['a schema not in the database', ['init', '--schema', 'Shop'], env, 'No schema "Shop" in the database (did you mean shop?)'],
      [
        "the service's own schema",
        ['init', '--schema', 'paginated_collections'],
        env,
        "Schema paginated_collections is the service's own: it holds no collections",
      ],
      ['an unknown option', ['init', '--schemas', 'shop'], env, "Invalid arguments to init: Unknown option '--schemas'"],
      [
        'check without a file',
        ['check'],
        env,
        'No collections file: name it (npm run --silent collections -- check collections.yaml) or set COLLECTIONS; init writes one (npm run --silent collections -- init > collections.yaml)',
      ],
      ['check of a file that is not there', ['check', 'missing.yaml'], env, 'Cannot read collections file missing.yaml: no such file'],
    ];
    for (const [name, args, caseEnv, line] of cases) {
      t.same(await run(args, caseEnv, dir), { code: 1, stdout: '', stderr: `${line}\n` }, name);
    }
    write('ok.yaml', 'collections: [{relation: shop.countries}]\n');
    t.same(
      await run(['check', 'ok.yaml'], { DATABASE_URL: refused }, dir),
      { code: 1, stdout: '', stderr: `Cannot read the catalog of 127.0.0.1:${port}/nothing: connection refused\n` },
      'check, connection refused',
    );
  });
});
