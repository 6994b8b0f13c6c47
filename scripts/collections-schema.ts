// `npm run collections:schema`: writes docs/collections.schema.json from the collections file's valibot schema.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { JSON_SCHEMA_PATH, jsonSchemaText } from '../lib/collections/json-schema.ts';

writeFileSync(fileURLToPath(new URL(`../${JSON_SCHEMA_PATH}`, import.meta.url)), jsonSchemaText());
console.log(`Wrote ${JSON_SCHEMA_PATH}`);
