// The collections file without a database: YAML and JSON, its schema's problems one line each, relation and field names.
import t from 'tap';
import { camelCase, parseRelationName } from '../../lib/collections/names.ts';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';
import { CollectionsFileError } from '../../lib/collections/problems.ts';

function problems(text: string, file = 'collections.yaml'): readonly string[] {
  try {
    parseCollectionsFile(text, file);
  } catch (error) {
    if (error instanceof CollectionsFileError) return error.problems;
    throw error;
  }
  throw new Error('Test: the file parsed');
}

t.test('a YAML file and the same in JSON', async (t) => {
  const yaml = `
# yaml-language-server: $schema=docs/collections.schema.json
collections:
  - relation: shop.films
    name: films
    fieldNames: camelCase
    columns: [film_id, title, released]
    filters:
      title: [eq, prefix]
    sort: [title]
    order: -released,title
    pageSize: { default: 10, max: 50 }
  - relation: '"Music"."Album"'
`;
  const parsed = parseCollectionsFile(yaml, 'c.yaml');
  t.same(parsed, {
    collections: [
      {
        relation: 'shop.films',
        name: 'films',
        fieldNames: 'camelCase',
        columns: ['film_id', 'title', 'released'],
        filters: { title: ['eq', 'prefix'] },
        sort: ['title'],
        order: '-released,title',
        pageSize: { default: 10, max: 50 },
      },
      { relation: '"Music"."Album"' },
    ],
  });
  t.same(parseCollectionsFile(JSON.stringify(parsed), 'c.json'), parsed);
});

t.test('every problem is one line naming the file, the collection and the setting', async (t) => {
  t.same(problems('collections: [{relation: shop.films, bogus: 1}]'), [
    'Invalid collections file collections.yaml, collection films: bogus is not a setting',
  ]);
  t.same(problems('collections: [{relation: shop.films, name: films, pageSize: {max: 0}}]'), [
    'Invalid collections file collections.yaml, collection films: pageSize.max must be a whole number from 1',
  ]);
  t.same(problems('collections: [{name: x}]'), ['Invalid collections file collections.yaml, collection x: relation is missing']);
  t.same(problems('collections: [{relation: 5}]'), [
    'Invalid collections file collections.yaml, collection #1: relation must be a relation name, e.g. public.film',
  ]);
  t.same(problems('collections: [{relation: a}, {relation: b, filters: {title: [like]}, variants: [scroll]}]'), [
    'Invalid collections file collections.yaml, collection b: variants[0] must be offset, page, cursor or time',
    'Invalid collections file collections.yaml, collection b: filters.title[0] must be one of eq, ne, lt, lte, gt, gte, in, prefix, isnull',
  ]);
  t.same(problems('collections: [{relation: a, name: "9lives"}]'), [
    'Invalid collections file collections.yaml, collection 9lives: name must start with a letter and hold only letters, digits, _ and -',
  ]);
  t.same(problems('collections: []'), ['Invalid collections file collections.yaml: collections must list at least one collection']);
  t.same(problems('tables: []'), [
    'Invalid collections file collections.yaml: collections is missing',
    'Invalid collections file collections.yaml: tables is not a setting',
  ]);
  for (const whole of ['- a', '', 'just text'])
    t.same(
      problems(whole),
      ['Invalid collections file collections.yaml: the file must be an object with collections'],
      JSON.stringify(whole),
    );
  const [yamlError] = problems('collections:\n  - relation: a\n  relation: b\n    x: [');
  t.match(yamlError, /^Invalid collections file collections\.yaml: .*line \d+, column \d+/);
  t.notMatch(yamlError, '\n', 'one line');
  t.match(problems('{"collections": [', 'c.json'), [/^Invalid collections file c\.json: /]);
  t.match(problems('collections: [{relation: a}]\ncollections: []'), [
    /^Invalid collections file collections\.yaml: Map keys must be unique/,
  ]);
});

t.test('access: anonymous and rows, each problem one line', async (t) => {
  const access = (text: string) =>
    parseCollectionsFile(`collections: [{relation: shop.orders, access: ${text}}]`, 'c.yaml').collections[0]!.access;
  t.same(access('{anonymous: false}'), { anonymous: false });
  t.same(access('{rows: {tenant_id: tenant, region: app_metadata.region}}'), {
    rows: { tenant_id: 'tenant', region: 'app_metadata.region' },
  });
  const line = (problem: string) => `Invalid collections file collections.yaml, collection orders: ${problem}`;
  const cases: [string, string][] = [
    ['yes', 'access must be an object of anonymous and rows'],
    ['{anonymous: no}', 'access.anonymous must be true or false'],
    ['{row: {tenant_id: tenant}}', 'access.row is not a setting'],
    ['{rows: {}}', 'access.rows must name at least one column and its claim'],
    ['{rows: [tenant_id]}', 'access.rows must map column names to claims (tenant_id: tenant)'],
    ['{rows: tenant_id}', 'access.rows must map column names to claims (tenant_id: tenant)'],
    ['{rows: {tenant_id: 5}}', 'access.rows.tenant_id must be a claim name, or a dotted path of them (app_metadata.tenant)'],
  ];
  for (const [text, problem] of cases) {
    t.same(problems(`collections: [{relation: shop.orders, access: ${text}}]`), [line(problem)], text);
  }
  for (const path of ['', 'app_metadata.', '.tenant', 'a..b']) {
    t.same(
      problems(`collections: [{relation: shop.orders, access: {rows: {tenant_id: ${JSON.stringify(path)}}}}]`),
      [line('access.rows.tenant_id must be a claim name, or a dotted path of them (app_metadata.tenant), no part empty')],
      path,
    );
  }
});

t.test('relation names: schema-qualified or in public, any case, quoted where a part holds a dot or quote', async (t) => {
  t.same(parseRelationName('film'), { schema: 'public', name: 'film' });
  t.same(parseRelationName('Music.Album'), { schema: 'Music', name: 'Album' });
  t.same(parseRelationName('"Music"."Album"'), { schema: 'Music', name: 'Album' });
  t.same(parseRelationName('"my.schema"."say ""hi"""'), { schema: 'my.schema', name: 'say "hi"' });
  t.same(parseRelationName('"Album"'), { schema: 'public', name: 'Album' });
  for (const bad of ['a.b.c', 'a.', '.a', '"a', 'a"b', '""', '"a"b']) t.type(parseRelationName(bad), 'string', `${bad} is no name`);
});

t.test('camelCase field names', async (t) => {
  const cases: [string, string][] = [
    ['release_year', 'releaseYear'],
    ['AlbumId', 'albumId'],
    ['film_ID', 'filmId'],
    ['ID', 'id'],
    ['last update', 'lastUpdate'],
    ['title', 'title'],
    // Letters of any script are kept whole: such a field is then no field name (ASCII), which resolve refuses.
    ['Größe', 'größe'],
    ['Straße_Nr', 'straßeNr'],
    ['ÄRGER', 'ärger'],
    ['prix_€', 'prix'],
  ];
  for (const [column, field] of cases) t.equal(camelCase(column), field, column);
});

t.test('fields: column names to field names, each a field name', async (t) => {
  const fields = (text: string) =>
    parseCollectionsFile(`collections: [{relation: shop.films, fields: ${text}}]`, 'c.yaml').collections[0]!.fields;
  t.same(fields('{Größe: size, "zip code": zip_code}'), { Größe: 'size', 'zip code': 'zip_code' });
  const line = (problem: string) => `Invalid collections file collections.yaml, collection films: ${problem}`;
  const cases: [string, string][] = [
    ['[Größe]', 'fields must map column names to field names (Größe: size)'],
    ['size', 'fields must map column names to field names (Größe: size)'],
    ['{}', 'fields must name at least one column and its field name'],
    ['{Größe: größe}', 'fields.Größe must be a field name: an ASCII letter or _, then ASCII letters, digits and _'],
    ['{Größe: 9lives}', 'fields.Größe must be a field name: an ASCII letter or _, then ASCII letters, digits and _'],
    ['{Größe: "a-b"}', 'fields.Größe must be a field name: an ASCII letter or _, then ASCII letters, digits and _'],
    ['{Größe: 5}', 'fields.Größe must be a field name: an ASCII letter or _, then ASCII letters, digits and _'],
  ];
  for (const [text, problem] of cases) t.same(problems(`collections: [{relation: shop.films, fields: ${text}}]`), [line(problem)], text);
});
