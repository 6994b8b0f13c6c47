// client/openapi.ts is what openapi-typescript makes of the current document (regenerate: npm run client:types),
// and the client stands alone: it imports nothing of the server, only its own generated types.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CLIENT_TYPES, clientTypes } from '../../scripts/client-types.ts';

t.test('client/openapi.ts is generated from the current document', async (t) => {
  const expected = await clientTypes();
  t.equal(readFileSync(CLIENT_TYPES, 'utf8'), expected, 'client/openapi.ts is up to date: run `npm run client:types` and commit it');
});

t.test('the client imports nothing but its own files', async (t) => {
  const folder = path.dirname(CLIENT_TYPES);
  const files = readdirSync(folder).filter((name) => name.endsWith('.ts'));
  t.ok(files.includes('index.ts'), `index.ts among ${files.join(', ')}`);
  for (const file of files) {
    const source = readFileSync(path.join(folder, file), 'utf8');
    const specifiers = [...source.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    t.same(
      specifiers.filter((specifier) => !/^\.\/[\w-]+\.ts$/.test(specifier!)),
      [],
      `${file} imports only files beside it`,
    );
  }
});
