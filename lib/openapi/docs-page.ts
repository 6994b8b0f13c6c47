// GET /docs: Swagger UI from the swagger-ui-dist package, served from node_modules and rendering /openapi.json;
// the page loads nothing from anywhere else (docs/reference/api.md, "The description and the docs page").
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Hono } from 'hono';
import { ApiError } from '../http/errors.ts';

/** The files of swagger-ui-dist the page loads, with their media types. */
const ASSETS: ReadonlyMap<string, string> = new Map([
  ['swagger-ui.css', 'text/css; charset=utf-8'],
  ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8'],
  ['favicon-32x32.png', 'image/png'],
]);

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Paginated collections: API reference</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
<link rel="service-desc" href="/openapi.json">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// validatorUrl null: otherwise Swagger UI sends the document to an online validator for its badge.
// The request snippets stay curl-only, and curl's `-g` matters for filters in brackets, which Swagger UI encodes.
const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  validatorUrl: null,
  deepLinking: true,
  displayRequestDuration: true,
  showCommonExtensions: false,
  defaultModelsExpandDepth: 0,
  docExpansion: 'list',
});
`;

/**
 * Enforced by the browser: the page and what it fetches come from this origin (and PUBLIC_URL's, where "Try it"
 * sends requests when it is set). Swagger UI sets inline styles and shows images as data: URLs.
 */
function contentSecurityPolicy(publicUrl: string | undefined): string {
  const connect = publicUrl ? `'self' ${new URL(publicUrl).origin}` : "'self'";
  return `default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src ${connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

/** The /docs routes: the page, its initialiser, and the assets, each read from node_modules on its first request and kept. */
export function docsRoutes(publicUrl: string | undefined): Hono {
  const directory = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const csp = contentSecurityPolicy(publicUrl);
  const loaded = new Map<string, Promise<Uint8Array<ArrayBuffer>>>();
  const docs = new Hono();
  docs.get('/', (c) => {
    c.header('content-security-policy', csp);
    return c.html(PAGE);
  });
  // The initialiser is answered by the assets' route rather than a route of its own: a fixed path beside a
  // parameter at the same place is what Hono's RegExpRouter refuses, and it would leave every request of the
  // app to the slower TrieRouter (tests/http/app-routes.test.ts checks which router the app gets).
  docs.get('/:asset', async (c) => {
    const asset = c.req.param('asset');
    if (asset === 'init.js') return c.body(INIT, 200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' });
    const type = ASSETS.get(asset);
    if (type === undefined) throw new ApiError('not_found', 'No such path');
    let body = loaded.get(asset);
    if (body === undefined) {
      body = readFile(path.join(directory, asset)).then((buffer) => new Uint8Array(buffer));
      loaded.set(asset, body);
    }
    return c.body(await body, 200, { 'content-type': type, 'cache-control': 'public, max-age=3600' });
  });
  return docs;
}
