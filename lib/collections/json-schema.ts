// The collections file's JSON Schema, for editors: generated from the valibot schema, published as docs/collections.schema.json.
import { toJsonSchema } from '@valibot/to-json-schema';
import { collectionsFileSchema } from './schema.ts';

/** Where the schema is published in the repository, which a file names with `$schema` or a yaml-language-server comment. */
export const JSON_SCHEMA_PATH = 'docs/collections.schema.json';

/** JSON Schema draft 2020-12 of the file; checks beyond it (the catalog's) are lib/collections/resolve.ts's. */
export function collectionsJsonSchema(): Record<string, unknown> {
  const { $schema, ...schema } = toJsonSchema(collectionsFileSchema, { target: 'draft-2020-12', errorMode: 'ignore' }) as Record<
    string,
    unknown
  >;
  return {
    $schema,
    title: 'Collections file',
    description: 'The tables and views a paginated-collections service serves (docs/reference/collections-file.md).',
    ...schema,
  };
}

/** The published file's text: the schema, two-space indented, ending with a newline. */
export function jsonSchemaText(): string {
  return `${JSON.stringify(collectionsJsonSchema(), null, 2)}\n`;
}
