// Field names: a column whose name is no field name (ASCII letters, digits and _) is refused with the way out, under
// asIs and under camelCase (which keeps a word's letters whole, so Größe is größe, never grE); `fields` names single
// columns, checked as every field name is (valid, unique after fieldNames, not a variant's parameter when filtered),
// and the field it names is what items, filters, sorts and the OpenAPI document use.
import t from 'tap';
import { readCatalog } from '../../lib/catalog/read.ts';
import { initFile } from '../../lib/collections/init.ts';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';
import { resolveCollections } from '../../lib/collections/resolve.ts';
import { testApp } from '../helpers/app.ts';
import { makeScratch, registryAhead } from '../helpers/collections.ts';
import { emptyDatabase } from '../helpers/db.ts';

const DDL = `
  create table sizes (id int primary key, "Größe" int not null, "zip code" text, label text not null);
  create index on sizes ("Größe", id);
  insert into sizes select n, n % 5, 'z' || n, 'l' || n from generate_series(1, 12) n;`;

const SERVED = `
collections:
  - relation: scratch.sizes
    fieldNames: camelCase
    fields: { Größe: size, label: title }
    filters: { Größe: [eq, lt], zip code: [prefix] }
    sort: [Größe]
`;

t.test('names against a catalog', async (t) => {
  const { sql } = await emptyDatabase(t);
  await makeScratch(sql, DDL);
  const catalog = await readCatalog(sql, { schemas: ['scratch'], serviceSchema: 'service' });
  const resolve = (yaml: string) => resolveCollections(parseCollectionsFile(yaml, 'c.yaml'), catalog, 'c.yaml');
  const problems = (entry: string) => resolve(`collections: [{relation: scratch.sizes, ${entry}}]`).problems;
  const line = (problem: string) => `Invalid collections file c.yaml, collection sizes: ${problem}`;

  t.test('a column whose name is no field name: refused with what to do', async (t) => {
    t.same(problems('columns: [id, Größe]'), [
      line(
        'column Größe would be field "Größe", no field name (an ASCII letter or _, then ASCII letters, digits and _): name it with fields: { Größe: … } (a field name of your choice), or leave it out',
      ),
    ]);
    t.same(problems('columns: [id, Größe], fieldNames: camelCase'), [
      line(
        'column Größe would be field "größe", no field name (an ASCII letter or _, then ASCII letters, digits and _): name it with fields: { Größe: … } (a field name of your choice), or leave it out',
      ),
    ]);
    t.same(problems('columns: [id, zip code]'), [
      line(
        'column zip code would be field "zip code", no field name (an ASCII letter or _, then ASCII letters, digits and _): use fieldNames: camelCase (zipCode), name it with fields: { "zip code": … }, or leave it out',
      ),
    ]);
  });

  t.test('fields: each column exists and is served, each field unique after fieldNames, none a parameter when filtered', async (t) => {
    t.same(problems('fields: { Grösse: size }'), [
      line('fields column Grösse: no such column in scratch.sizes'),
      line(
        'column Größe would be field "Größe", no field name (an ASCII letter or _, then ASCII letters, digits and _): name it with fields: { Größe: … } (a field name of your choice), or leave it out',
      ),
      line(
        'column zip code would be field "zip code", no field name (an ASCII letter or _, then ASCII letters, digits and _): use fieldNames: camelCase (zipCode), name it with fields: { "zip code": … }, or leave it out',
      ),
    ]);
    t.same(problems('columns: [id, label], fields: { Größe: size }'), [line('fields column Größe is not among the columns served')]);
    t.same(problems('columns: [id, Größe], fields: { Größe: id }'), [
      line('columns id and Größe would both be field id: name one of them with fields'),
    ]);
    t.same(problems('fieldNames: camelCase, fields: { Größe: zipCode }'), [
      line('columns Größe and zip code would both be field zipCode: name one of them with fields'),
    ]);
    t.same(problems('columns: [id, Größe], fields: { Größe: limit }, filters: { Größe: [eq] }'), [
      line(
        'filter Größe: field limit would be read as the query parameter limit; rename it with fields or fieldNames, or do not filter it',
      ),
    ]);
    const resolved = resolve(SERVED);
    t.same(resolved.problems, []);
    t.same(
      resolved.collections[0]!.fields.map((field) => [field.column.name, field.name]),
      [
        ['id', 'id'],
        ['Größe', 'size'],
        ['zip code', 'zipCode'],
        ['label', 'title'],
      ],
      'fields over fieldNames, fieldNames for the others',
    );
  });

  t.test('init leaves such a column out with the fields entry that serves it, and its file is served', async (t) => {
    const text = initFile(catalog);
    t.match(text, '    columns: [id, label]\n');
    t.match(
      text,
      '    # left out: "Größe" (no field name, which is ASCII letters, digits and _; serve it with fields: { "Größe": <a name of ASCII letters, digits and _> })\n',
    );
    t.match(
      text,
      '    # left out: "zip code" (no field name, which is ASCII letters, digits and _; serve it with fields: { "zip code": zipCode })\n',
    );
    t.same(resolveCollections(parseCollectionsFile(text, 'init.yaml'), catalog, 'init.yaml').problems, []);
  });
});

t.test('a field named by fields is what items, filters, sorts, links and the OpenAPI document use', async (t) => {
  const api = await testApp(t, { registry: await registryAhead(t, DDL, SERVED) });
  await makeScratch(api.database.sql, DDL);
  const { status, body } = await api.json('/v1/sizes?size[lt]=2&sort=-size&zipCode[prefix]=z1&limit=3');
  t.equal(status, 200, JSON.stringify(body));
  t.same(body.sizes, [
    { id: 11, size: 1, zipCode: 'z11', title: 'l11' },
    { id: 1, size: 1, zipCode: 'z1', title: 'l1' },
    { id: 10, size: 0, zipCode: 'z10', title: 'l10' },
  ]);
  t.match(body._links.self.href, /[?&]size%5Blt%5D=2(&|$)/);
  const refused = await api.json('/v1/sizes?Größe=1');
  t.equal(refused.status, 400, 'the column name is no parameter');
  const document = (await api.json('/openapi.json')).body;
  const names = document.paths['/v1/sizes'].get.parameters.map(
    (parameter: { name?: string; $ref?: string }) => parameter.name ?? parameter.$ref,
  );
  t.ok(names.includes('size'), `size among ${names.join(', ')}`);
  t.notOk(
    names.some((name: string) => /Gr|ö/.test(name)),
    'no parameter named after the column',
  );
});
