// The published JSON Schema of the collections file: current with the valibot schema, agreeing with it, and every setting documented.
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import t from 'tap';
import { collectionsJsonSchema, JSON_SCHEMA_PATH, jsonSchemaText } from '../../lib/collections/json-schema.ts';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';

const root = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

t.test(`${JSON_SCHEMA_PATH} is the one the schema generates (npm run collections:schema)`, async (t) => {
  t.equal(read(JSON_SCHEMA_PATH), jsonSchemaText());
});

t.test('editors and the service agree on what a file is', async (t) => {
  const validate = new Ajv2020({ strict: true }).compile(collectionsJsonSchema());
  const parseable = (text: string) => {
    try {
      parseCollectionsFile(text, 'c.json');
      return true;
    } catch {
      return false;
    }
  };
  const files: unknown[] = [
    { collections: [{ relation: 'shop.films' }] },
    {
      $schema: `../${JSON_SCHEMA_PATH}`,
      collections: [
        {
          relation: '"Music"."Album"',
          name: 'albums',
          columns: ['AlbumId', 'Title'],
          fieldNames: 'camelCase',
          key: ['AlbumId'],
          variants: ['offset', 'cursor', 'time'],
          defaultVariant: 'cursor',
          timeColumn: 'created_at',
          filters: { Title: ['eq', 'prefix', 'isnull'] },
          sort: ['Title'],
          order: ['-Title'],
          unindexedSorts: true,
          pageSize: { default: 10, max: 50 },
          countThreshold: 0,
          cost: { itemsPerUnit: 50, countedPerUnit: 5000, indexed: { Title: 1000 }, unindexedSort: 3 },
        },
      ],
    },
    { collections: [] },
    { collections: [{ relation: 'a', bogus: true }] },
    { collections: [{ relation: 'a', pageSize: { max: 0 } }] },
    { collections: [{ relation: 'a', filters: { b: ['like'] } }] },
    { collections: [{ relation: 'a', name: '9' }] },
    { collections: [{ relation: 'a', order: 3 }] },
    { collections: [{ relation: 'a', countThreshold: 1.5 }] },
    { tables: [] },
  ];
  for (const file of files) {
    const text = JSON.stringify(file);
    t.equal(validate(file), parseable(text), text);
  }
});

t.test('docs/reference/collections-file.md describes every setting', async (t) => {
  const docs = read('docs/reference/collections-file.md');
  const schema = collectionsJsonSchema() as any;
  const entry = schema.properties.collections.items;
  const settings = [
    ...Object.keys(entry.properties),
    ...Object.keys(entry.properties.pageSize.properties).map((name) => `pageSize.${name}`),
    ...Object.keys(entry.properties.cost.properties).map((name) => `cost.${name}`),
  ];
  for (const setting of settings) t.match(docs, `\`${setting}\``, setting);
});
