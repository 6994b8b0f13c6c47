// The example collections files in docs/examples parse against the file's schema (no database: the walkthrough,
// docs/how-to/pagila.md, serves them on the sample database they name).
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

t.test('docs/examples/pagila.yaml: the hand-tuned Pagila file', async (t) => {
  const file = parseCollectionsFile(read('docs/examples/pagila.yaml'), 'docs/examples/pagila.yaml');
  t.same(
    file.collections.map((collection) => collection.name ?? collection.relation),
    [
      'films',
      'actors',
      'film-actors',
      'customers',
      'public.staff',
      'rentals',
      'payments',
      'film-list',
      'sales-by-store',
      'rentals-by-category',
    ],
  );
  t.same(
    file.collections
      .filter((collection) => collection.relation !== 'public.film_list' && collection.fieldNames !== 'camelCase')
      .map((collection) => collection.name ?? collection.relation),
    [],
    'camelCase fields (film_list has no column to rename)',
  );
});

t.test('docs/how-to/pagila.md shows the file in full, as it is in docs/examples', async (t) => {
  const walkthrough = read('docs/how-to/pagila.md');
  t.match(walkthrough, `\`\`\`yaml\n${read('docs/examples/pagila.yaml')}\`\`\``, 'the same text, in a yaml block');
});
