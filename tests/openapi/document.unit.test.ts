// The OpenAPI document without a database: it validates as OpenAPI 3.1, and it is the registry's: a collection
// added to the collections file appears with its parameters, filters, sort keys and item, with no other change.
import { validate } from '@readme/openapi-parser';
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import { openApiDocument } from '../../lib/openapi/document.ts';
import { createRegistry } from '../../lib/pagination/registry.ts';
import { variantParams } from '../../lib/pagination/variant-params.ts';
import { snapshotRegistry } from '../helpers/collections.ts';
import { documentChecker } from '../helpers/openapi.ts';

// The query parameters: what a collection takes in its URL (If-None-Match, a header, aside).
const names = (operation: any) => operation.parameters.filter((p: any) => p.in === 'query').map((p: any) => p.name);

t.test('the document of the demo collections validates as OpenAPI 3.1', async (t) => {
  const document = openApiDocument(demoRegistry());
  t.equal(document.openapi, '3.1.0');
  const result = await validate(structuredClone(document) as any);
  t.same(result, { valid: true, warnings: [], specification: 'OpenAPI' }, 'valid, no warning');
  // Every schema compiles under Ajv's strict 2020-12 mode (no keyword it does not know).
  const { validate: check } = documentChecker(document);
  for (const name of Object.keys((document as any).components.schemas)) t.doesNotThrow(() => check(name, {}), `${name} compiles`);
});

t.test('a collection added to the registry appears in the document, with what its file says', async (t) => {
  const widgets = snapshotRegistry(`
collections:
  - relation: demo.products
    name: widgets
    fieldNames: camelCase
    columns: [id, name, created_at]
    variants: [page, cursor]
    defaultVariant: page
    filters: { name: [eq, prefix, ne], created_at: [gte, in] }
    sort: [name, created_at]
    order: -created_at
    pageSize: { default: 5, max: 7 }
    cost: { itemsPerUnit: 10, indexed: { id: 1000, name: 100, created_at: 100 } }
`).get('widgets')!;
  const document: any = openApiDocument(createRegistry([...demoRegistry().values(), widgets]));
  t.same((await validate(structuredClone(document))).valid, true, 'still valid');
  const operation = document.paths['/v1/widgets'].get;
  t.same(
    names(operation).sort(),
    [
      'page',
      'page-size',
      'cursor',
      'since_id',
      'sort',
      'count',
      'name',
      'name[prefix]',
      'name[ne]',
      'createdAt[gte]',
      'createdAt[in]',
    ].sort(),
    'the variants’ parameters and every filter as spelled on the wire',
  );
  const param = (name: string) => operation.parameters.find((p: any) => p.name === name);
  t.same(param('page-size').schema, { type: 'integer', minimum: 1, maximum: 7 }, 'its page sizes');
  t.match(param('page-size').description, 'Default 5.');
  t.same(param('page-size')['x-variants'], ['page', 'cursor']);
  t.equal(param('sort').schema.pattern, '^-?(?:name|createdAt)(?:,-?(?:name|createdAt))*$', 'its sort keys');
  t.match(param('sort').description, 'Default: `-createdAt`.');
  t.same(
    document.components.schemas.WidgetsItem.properties.createdAt.anyOf[0].format,
    'date-time',
    'the item schema from its fields and types',
  );
  t.same(document.components.schemas.WidgetsItem.required, ['id', 'name', 'createdAt']);
  t.same(operation.responses['200'].content['application/json'].schema, {
    oneOf: [{ $ref: '#/components/schemas/WidgetsPageChunk' }, { $ref: '#/components/schemas/WidgetsCursorChunk' }],
  });
  t.same(Object.keys(document.components.schemas.WidgetsPageChunk.properties), [
    'page',
    'pageSize',
    'totalPages',
    'count',
    'widgets',
    '_links',
  ]);
  const index = document.paths['/v1'].get.responses['200'].content['application/json'].schema.properties._links;
  t.same(Object.keys(index.properties), ['self', 'products', 'orders', 'events', 'widgets'], 'the index may link every collection');
  t.same(index.required, ['self'], 'and links those the client may read: only self is always there');
});

t.test('every parameter a variant takes is described, for each collection that offers the variant', async (t) => {
  const document: any = openApiDocument(demoRegistry());
  for (const collection of demoRegistry().values()) {
    const documented = new Set(names(document.paths[`/v1/${collection.name}`].get));
    for (const variant of collection.variants) {
      for (const name of variantParams[variant].takes) {
        // Only a collection without sort keys goes without `sort`.
        if (name === 'sort' && collection.sortKeys.length === 0) continue;
        t.ok(documented.has(name), `${collection.name}: ${name} (${variant})`);
      }
    }
  }
});

t.test('the problem schema lists every error code, and each problem response only those of its status', async (t) => {
  const document: any = openApiDocument(demoRegistry());
  const { validate: check } = documentChecker(document);
  t.ok(document.components.schemas.Problem.properties.code.enum.includes('Concurrency_limit_exceeded'));
  const problem429 = document.paths['/v1/products'].get.responses['429'].content['application/problem+json'].schema;
  const base = { type: 'about:blank', title: 'Too Many Requests', status: 429, detail: 'x', requestId: 'r1' };
  t.same(check(problem429, { ...base, code: 'Request_limit_exceeded' }), []);
  t.not(check(problem429, { ...base, code: 'invalid_parameter' }).length, 0, 'a code of another status is refused');
  t.not(check('Problem', { ...base, code: 'no_such_code' }).length, 0, 'an unknown code is refused');
});

t.test('every operation has a description, and every GET a HEAD: its parameters and headers, no content', async (t) => {
  const document: any = openApiDocument(demoRegistry());
  const methods = ['get', 'head', 'put', 'post', 'patch', 'delete'];
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const method of methods.filter((m) => item[m] !== undefined)) {
      t.match(item[method].description, /\S/, `${method.toUpperCase()} ${path} is described`);
      t.ok(item[method].responses['4XX'], `${method.toUpperCase()} ${path}: the HTTP parser's refusals`);
    }
    if (item.get === undefined) continue;
    const { get, head } = item;
    t.ok(head, `HEAD ${path}`);
    t.same(head.parameters, get.parameters, `HEAD ${path}: the GET's parameters`);
    t.same(head.security, get.security, `HEAD ${path}: the GET's security`);
    t.same(Object.keys(head.responses), Object.keys(get.responses), `HEAD ${path}: the GET's statuses`);
    for (const [status, response] of Object.entries<any>(head.responses)) {
      if (response.$ref !== undefined) continue;
      t.same(response.headers, get.responses[status].headers, `HEAD ${path} ${status}: the GET's headers`);
      t.equal(response.content, undefined, `HEAD ${path} ${status}: no body`);
    }
  }
});

t.test('public paths say so (security: []), and info names a contact and a license', async (t) => {
  const document: any = openApiDocument(demoRegistry());
  for (const path of ['/', '/healthz', '/readyz']) {
    t.same(document.paths[path].get.security, [], `GET ${path} is public`);
    t.same(document.paths[path].head.security, [], `HEAD ${path} is public`);
  }
  t.same(document.paths['/v1/keys'].post.security, [], 'so is POST /v1/keys');
  t.match(document.info.contact, { name: /paginated-collections/ });
  t.match(document.info.license, { name: /UNLICENSED/, identifier: 'LicenseRef-UNLICENSED' });
});
