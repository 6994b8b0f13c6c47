// The description passes the two linters API tools are held to: Redocly CLI's `recommended` ruleset and
// Spectral's `spectral:oas`, with neither an error nor a warning (tests/helpers/linters.ts runs both). A team's
// collections' document is linted in tests/openapi/team-collections.test.ts.
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import { openApiDocument } from '../../lib/openapi/document.ts';
import { lintsClean } from '../helpers/linters.ts';

t.test('Redocly recommended and spectral:oas find nothing in the description', async (t) => {
  await lintsClean(t, openApiDocument(demoRegistry()));
});
