// The OpenAPI 3.1 document of the service (GET /openapi.json), generated once at start-up from the collection
// registry, the variants' table, the error codes and the body schemas: nothing in it is written beside them.
import { toJsonSchema } from '@valibot/to-json-schema';
import type * as v from 'valibot';
import packageJson from '../../package.json' with { type: 'json' };
import { KEYS, collectionPath as pathOf, ROUTES } from '../http/routes.ts';
import { needsCredentials } from '../pagination/access.ts';
import type { Collection, Registry } from '../pagination/registry.ts';
import { KEY_BODY_BYTES, keyBody, keyParams, MAX_CLAIMS_BYTES, newKeyBody, tierBody, tierParams } from '../ratelimit/admin.ts';
import { KEY_PATTERN } from '../ratelimit/identity.ts';
import { issueBody, NEW_KEY_TIER } from '../ratelimit/keys.ts';
import { CHUNK_HEADERS, CORS_HEADERS, EVERY_ANSWER_HEADERS, type HeaderName, headerDocs, RATE_LIMIT_HEADERS } from './headers.ts';
import { collectionParameters } from './parameters.ts';
import { chunkResponseSchema, codesOf, collectionSchemas, ref, sharedSchemas } from './schemas.ts';

type Schema = Record<string, unknown>;

export interface DocumentOptions {
  /** The base URL of `servers` (PUBLIC_URL); unset: "/", the origin the document was fetched from. */
  readonly serverUrl?: string | undefined;
}

/** A valibot schema as JSON Schema 2020-12 (custom checks, such as "no control characters", are left to the description). */
function jsonSchema(schema: v.GenericSchema): Schema {
  const { $schema: _, ...rest } = toJsonSchema(schema, { target: 'draft-2020-12', errorMode: 'ignore' }) as Schema;
  return rest;
}

/** The headers of a response: each from the one table (lib/openapi/headers.ts), required when always sent. */
function headers(names: readonly HeaderName[], required = true): Record<string, Schema> {
  return Object.fromEntries(names.map((name) => [name, { ...headerDocs[name], required }]));
}

/** What every answer carries besides its own: the request id, and CORS headers when its Origin is allowed. */
const everyAnswer = { ...headers(EVERY_ANSWER_HEADERS), ...headers(CORS_HEADERS, false) };

function json(description: string, schema: Schema, responseHeaders: Record<string, Schema> = {}): Schema {
  return { description, headers: { ...responseHeaders, ...everyAnswer }, content: { 'application/json': { schema } } };
}

/** A problem+json response of one status: the shared schema, narrowed to the codes of that status. */
function problem(status: number, description: string, responseHeaders: Record<string, Schema> = {}, codes = codesOf(status)): Schema {
  const schema = { allOf: [ref('Problem'), { type: 'object', properties: { status: { const: status }, code: { enum: codes } } }] };
  // Every 401 challenges (RFC 9110, section 11.6.1).
  const challenge = status === 401 ? headers(['WWW-Authenticate']) : {};
  return {
    description: `${description} (${codes.join(', ')})`,
    headers: { ...responseHeaders, ...challenge, ...everyAnswer },
    content: { 'application/problem+json': { schema } },
  };
}

const rateLimited = headers(RATE_LIMIT_HEADERS);
const withRetry = headers([...RATE_LIMIT_HEADERS, 'Retry-After']);
/** The security of a public path: none at all, said explicitly (`[]`), where `[{}]` would make a credential optional. */
const PUBLIC: Schema[] = [];

/**
 * The answers every request under /v1 may get besides its own: the limiter's, and the database away; a collection's
 * also its 503 collection_unavailable, when the catalog no longer serves it as the collections file says.
 */
function limitedErrors(collection = false): Record<string, Schema> {
  return {
    '403': problem(403, 'The request costs more than the whole allowance of its tier: waiting would not help', rateLimited, [
      'Cost_exceeds_allowance',
    ]),
    '429': problem(
      429,
      'The allowance is used up, too many requests are in flight, or a query used what its client had left: wait Retry-After',
      withRetry,
    ),
    '503': collection
      ? problem(
          503,
          'The database is away or too slow, or the collection is unavailable (the database no longer matches its collections file): try again after Retry-After',
          headers(['Retry-After']),
        )
      : problem(503, 'The database is away or too slow: try again after Retry-After', headers(['Retry-After']), ['unavailable']),
  };
}

/**
 * What any request may get before a route sees it: Node's HTTP parser refuses a malformed request, one too
 * slow to arrive, or headers over the limit (lib/http/client-error.ts). One shared response, referenced by
 * every operation as its `4XX`: the statuses an operation lists itself come first.
 */
const REFUSED_STATUSES = [400, 408, 431] as const;
const REFUSED_CODES = ['invalid_parameter', 'request_timeout', 'headers_too_large'];
const refusedResponse: Schema = {
  description:
    'The HTTP parser refused the request before any route saw it: malformed (400), too slow to arrive (408), headers over the limit (431)',
  headers: headers(EVERY_ANSWER_HEADERS),
  content: {
    'application/problem+json': {
      schema: {
        allOf: [ref('Problem'), { type: 'object', properties: { status: { enum: REFUSED_STATUSES }, code: { enum: REFUSED_CODES } } }],
      },
    },
  },
};
const refused = { '4XX': { $ref: '#/components/responses/Refused' } };

/**
 * The HEAD of a GET: Hono answers HEAD wherever GET is, with the GET's status and headers and no body
 * (docs/reference/api.md, "URLs"), so it is described as the GET without its responses' content.
 */
function headOf(get: Schema, path: string): Schema {
  const responses = Object.fromEntries(
    Object.entries(get.responses as Record<string, Schema>).map(([status, response]) => {
      if (response.$ref !== undefined) return [status, response];
      const { content: _, ...rest } = response;
      return [status, rest];
    }),
  );
  const charged = path.startsWith(ROUTES.index) ? ', and is charged what the GET would be' : '';
  return {
    ...get,
    operationId: `${get.operationId}_head`,
    summary: `${get.summary} (headers only)`,
    description: `The answer to GET ${path} without its body: the same status and headers${charged}. ${get.description}`,
    responses,
  };
}

function linksObject(rels: readonly string[], required: readonly string[] = rels): Schema {
  return {
    type: 'object',
    properties: {
      _links: {
        type: 'object',
        properties: Object.fromEntries(rels.map((rel) => [rel, ref('Link')])),
        required,
        additionalProperties: false,
      },
    },
    required: ['_links'],
    additionalProperties: false,
  };
}

function collectionPath(collection: Collection): Schema {
  const variants = collection.variants.join(', ');
  return {
    get: {
      operationId: `list_${collection.name}`,
      tags: ['collections'],
      summary: `A chunk of ${collection.name}`,
      description:
        `Pagination variants: ${variants} (default ${collection.defaultVariant}); the parameters of a request pick one ` +
        '(docs/reference/api.md, "Choosing the variant"), and parameters of two variants in one request are a 400. ' +
        `Page size ${collection.pageSize.default} by default, at most ${collection.pageSize.max}. Follow \`_links.next\` (or the Link header) to the end.`,
      // A collection that anonymous clients read takes credentials too ({} is "none needed").
      security: needsCredentials(collection) ? [{ bearerAuth: [] }] : [{}, { bearerAuth: [] }],
      parameters: [
        ...collectionParameters(collection),
        {
          name: 'If-None-Match',
          in: 'header',
          required: false,
          description:
            'The ETag of a chunk this client has: while the chunk is the same, the answer is a 304 that gives back the units of sending its items (those for rows read stay charged; `*` is charged in full)',
          schema: { type: 'string' },
        },
      ],
      responses: {
        '200': json(`A chunk: ${variants} pagination`, chunkResponseSchema(collection), {
          Link: { ...headerDocs.Link, required: true },
          ...headers(CHUNK_HEADERS),
          ...headers(['Vary', 'Content-Encoding'], false),
          ...rateLimited,
        }),
        '304': {
          description: 'Not Modified: the chunk If-None-Match names is the current one; its units are given back',
          headers: { ...headers(CHUNK_HEADERS), ...headers(['Vary'], false), ...rateLimited, ...everyAnswer },
        },
        '400': problem(400, 'A parameter, filter, sort or cursor is wrong; invalid_params names each', rateLimited),
        '401': problem(401, 'The API key is unknown, revoked or malformed', rateLimited),
        ...limitedErrors(true),
      },
    },
  };
}

const adminErrors = {
  '401': problem(401, 'No Authorization header'),
  '403': problem(403, 'The admin token is not valid', {}, ['forbidden']),
};

function tier(): Schema {
  const body = jsonSchema(tierBody);
  const name = (jsonSchema(tierParams).properties as Record<string, Schema>).name!;
  return { ...body, properties: { name, ...(body.properties as Schema) }, required: ['name', ...(body.required as string[])] };
}

function adminPaths(): Record<string, Schema> {
  const security = [{ adminToken: [] }];
  const tags = ['operator'];
  const pathParam = (schema: v.GenericSchema, name: string) => ({
    name,
    in: 'path',
    required: true,
    schema: (jsonSchema(schema).properties as Record<string, Schema>)[name],
  });
  const body = (schema: v.GenericSchema) => ({ required: true, content: { 'application/json': { schema: jsonSchema(schema) } } });
  const keyBodyOf = (schema: v.GenericSchema, minProperties: number) => {
    const shown = keyBodySchema(jsonSchema(schema));
    return { required: true, content: { 'application/json': { schema: minProperties > 0 ? { ...shown, minProperties } : shown } } };
  };
  const overKeyBody = problem(413, `The body is over ${KEY_BODY_BYTES} bytes`);
  return {
    [`${ROUTES.admin}/tiers`]: {
      get: {
        operationId: 'list_tiers',
        tags,
        security,
        summary: 'The tiers, by allowance, then name',
        description: 'Every tier with its allowance (units per window), its window and its concurrency cap.',
        responses: {
          '200': json('The tiers', {
            type: 'object',
            properties: { tiers: { type: 'array', items: ref('Tier') } },
            required: ['tiers'],
            additionalProperties: false,
          }),
          ...adminErrors,
        },
      },
    },
    [`${ROUTES.admin}/tiers/{name}`]: {
      put: {
        operationId: 'put_tier',
        tags,
        security,
        summary: 'Creates or changes a tier',
        description:
          'Creates the tier (201) or changes it (200). Every instance applies it from its next request on: each rate-limit decision reads the tiers.',
        parameters: [pathParam(tierParams, 'name')],
        requestBody: body(tierBody),
        responses: {
          '200': json('The tier, changed', ref('Tier')),
          '201': json('The tier, created', ref('Tier')),
          '400': problem(400, 'A body field or the name is wrong'),
          ...adminErrors,
          '413': problem(413, 'The body is over 4096 bytes'),
        },
      },
    },
    [`${ROUTES.admin}/keys`]: {
      post: {
        operationId: 'create_key',
        tags,
        security,
        summary: 'Issues a key with a tier, collections and claims, shown once',
        description:
          'The key (`pck_…`) is in the answer this once; the service keeps only its SHA-256. `collections` absent or null: every collection. ' +
          '`claims` feed the collections’ row rules. Every instance finds the key from its next request on.',
        requestBody: keyBodyOf(newKeyBody, 0),
        responses: {
          '201': json('The key, with its secret', ref('IssuedKey')),
          '400': problem(400, 'A body field is wrong, or names a tier or collection that does not exist'),
          ...adminErrors,
          '413': overKeyBody,
        },
      },
    },
    [`${ROUTES.admin}/keys/{id}`]: {
      get: {
        operationId: 'get_key',
        tags,
        security,
        summary: 'A key: its tier, collections and claims (never its secret)',
        description: 'A revoked key is shown too, with `revokedAt`.',
        parameters: [pathParam(keyParams, 'id')],
        responses: {
          '200': json('The key (no secret)', ref('Key')),
          '400': problem(400, 'The id is wrong'),
          ...adminErrors,
          '404': problem(404, 'No such key'),
        },
      },
      patch: {
        operationId: 'change_key',
        tags,
        security,
        summary: 'Changes a key’s tier, collections or claims',
        description:
          'Changes the fields the body names, at least one; `collections: null` is every collection again. The tier and the collections must exist. ' +
          'Every instance applies it from the key’s next request on. The answer never carries the key’s secret.',
        parameters: [pathParam(keyParams, 'id')],
        requestBody: keyBodyOf(keyBody, 1),
        responses: {
          '200': json('The key (no secret)', ref('Key')),
          '400': problem(400, 'A body field or the id is wrong, the body is empty, or it names a tier or collection that does not exist'),
          ...adminErrors,
          '404': problem(404, 'No such key, or it is revoked'),
          '413': overKeyBody,
        },
      },
      delete: {
        operationId: 'revoke_key',
        tags,
        security,
        summary: 'Revokes a key: a 401 from its next request on',
        description:
          'From its next request on, at any instance, the key is a 401 invalid_api_key. A revoked key cannot be moved or revoked again (404).',
        parameters: [pathParam(keyParams, 'id')],
        responses: {
          '204': { description: 'Revoked' },
          '400': problem(400, 'The id is wrong'),
          ...adminErrors,
          '404': problem(404, 'No such key, or it is revoked already'),
        },
      },
    },
  };
}

/**
 * A key body's JSON Schema with what valibot's cannot say: each collection once, and the claims an object of
 * named claims (checked in code: lib/ratelimit/admin.ts).
 */
function keyBodySchema(schema: Schema): Schema {
  const properties = schema.properties as Record<string, Schema>;
  const [list, none] = properties.collections!.anyOf as Schema[];
  return {
    ...schema,
    properties: {
      ...properties,
      collections: {
        anyOf: [{ ...list, uniqueItems: true }, none],
        description: 'The collections the key may read; null: every collection',
      },
      claims: claimsSchema,
    },
  };
}

const claimsSchema: Schema = {
  type: 'object',
  propertyNames: { minLength: 1 },
  additionalProperties: true,
  description: `What the collections’ row rules compare with: any JSON values, at most ${MAX_CLAIMS_BYTES} bytes as JSON`,
};

/** The OpenAPI 3.1 document of a registry's collections and the service's other paths. */
export function openApiDocument(registry: Registry, options: DocumentOptions = {}): Schema {
  const collections = [...registry.values()];
  const schemas: Record<string, Schema> = { ...sharedSchemas() };
  for (const collection of collections) Object.assign(schemas, collectionSchemas(collection));
  schemas.Tier = { ...tier(), additionalProperties: false };
  schemas.Key = {
    type: 'object',
    properties: {
      id: { type: 'string' },
      prefix: { type: 'string', description: 'The first ten characters of the key' },
      name: { type: ['string', 'null'] },
      tier: { type: 'string' },
      collections: {
        type: ['array', 'null'],
        items: { type: 'string' },
        description: 'The collections the key may read; null: every collection',
      },
      claims: claimsSchema,
      createdAt: { type: 'string', format: 'date-time' },
      revokedAt: { type: 'string', format: 'date-time', description: 'Only on a revoked key' },
    },
    required: ['id', 'prefix', 'name', 'tier', 'collections', 'claims', 'createdAt'],
    additionalProperties: false,
  };
  const { revokedAt: _, ...issued } = (schemas.Key as { properties: Record<string, Schema> }).properties;
  schemas.IssuedKey = {
    type: 'object',
    properties: { ...issued, key: { type: 'string', pattern: KEY_PATTERN.source, description: 'The key, shown this once' } },
    required: ['id', 'key', 'prefix', 'name', 'tier', 'collections', 'claims', 'createdAt'],
    additionalProperties: false,
  };

  const paths: Record<string, Schema> = {
    [ROUTES.root]: {
      get: {
        operationId: 'root',
        tags: ['service'],
        summary: 'Where to start: the API, its documentation and this document',
        description:
          'Links to the API (/v1), its docs page (/docs) and this description (/openapi.json), in the body and in a Link header (RFC 8631). ' +
          'They start with PUBLIC_URL when the service has one, otherwise with the request’s own origin. Public, not rate-limited.',
        security: PUBLIC,
        responses: {
          '200': json('Links', linksObject(['self', 'api', 'service-doc', 'service-desc']), {
            Link: { ...headerDocs.Link, required: true },
          }),
          '400': problem(400, 'The links’ origin (Host, or X-Forwarded-Host from a trusted proxy) is over 300 characters'),
        },
      },
    },
    [ROUTES.index]: {
      get: {
        operationId: 'index',
        tags: ['collections'],
        summary: 'The index: a link to every collection the client may read',
        description:
          'One `_links` entry per collection the client may read (its credentials, their collections and claims: docs/reference/api.md, "Access"), in the body and in a Link header, which also links this description and the docs page. ' +
          'Rate-limited like everything under /v1: without an API key or a token a client is counted by its IP address.',
        security: [{}, { bearerAuth: [] }],
        responses: {
          '200': json('Links', linksObject(['self', ...registry.keys()], ['self']), {
            Link: { ...headerDocs.Link, required: true },
            ...rateLimited,
          }),
          '400': problem(400, 'The links’ origin (Host, or X-Forwarded-Host from a trusted proxy) is over 300 characters', rateLimited),
          '401': problem(401, 'The API key is unknown, revoked or malformed', rateLimited),
          ...limitedErrors(),
        },
      },
    },
  };
  for (const collection of collections) paths[pathOf(collection.name)] = collectionPath(collection);
  paths[pathOf(KEYS)] = {
    post: {
      operationId: 'issue_key',
      tags: ['keys'],
      summary: `Issues an API key on the ${NEW_KEY_TIER} tier, shown once`,
      description:
        'Limited per IP address by the registration tier; an Authorization header is ignored. Send the key as `Authorization: Bearer <key>`.',
      security: [],
      requestBody: { required: false, content: { 'application/json': { schema: jsonSchema(issueBody) } } },
      responses: {
        '201': json(
          'The key',
          {
            type: 'object',
            properties: {
              id: { type: 'string' },
              key: { type: 'string', pattern: KEY_PATTERN.source },
              tier: { type: 'string', const: NEW_KEY_TIER },
              name: { type: 'string' },
            },
            required: ['id', 'key', 'tier'],
            additionalProperties: false,
          },
          rateLimited,
        ),
        '400': problem(400, 'The body is not a JSON object, or a field is wrong', rateLimited),
        '413': problem(413, 'The body is over 4096 bytes', rateLimited),
        ...limitedErrors(),
      },
    },
  };
  Object.assign(paths, adminPaths());
  paths[ROUTES.health] = {
    get: {
      operationId: 'healthz',
      tags: ['service'],
      summary: 'The process is alive (not rate-limited; the database is not asked)',
      description: 'A liveness check: 200 while the process runs, whatever the database does. Public, not rate-limited.',
      security: PUBLIC,
      responses: {
        '200': json('Alive', {
          type: 'object',
          properties: { status: { const: 'ok' } },
          required: ['status'],
          additionalProperties: false,
        }),
      },
    },
  };
  paths[ROUTES.ready] = {
    get: {
      operationId: 'readyz',
      tags: ['service'],
      summary: 'The database answers (not rate-limited)',
      description:
        'A readiness check: 200 when the database answers `select 1` on the rate limiter’s own connection within 2.5 s, ' +
        'with the generation of the collections file and catalog served and the collections unavailable; ' +
        'otherwise 503, as while the instance drains after a stop signal. Public, not rate-limited.',
      security: PUBLIC,
      responses: {
        '200': json('Ready', {
          type: 'object',
          properties: {
            status: { const: 'ready' },
            collections: {
              type: 'object',
              description: 'What is served: which reading of the collections file and the catalog, and what of it is unavailable',
              properties: {
                generation: {
                  type: 'integer',
                  minimum: 1,
                  description: '1 at start-up, one more at each reload that changed what is served',
                },
                hash: { type: 'string', description: 'A digest of the file and of what each collection was resolved to' },
                unavailable: {
                  type: 'array',
                  items: { type: 'string' },
                  description: 'The collections answered 503 collection_unavailable: the catalog does not serve them as the file says',
                },
              },
              required: ['generation', 'hash', 'unavailable'],
              additionalProperties: false,
            },
          },
          required: ['status', 'collections'],
          additionalProperties: false,
        }),
        '503': problem(503, 'The database did not answer within 2.5 s, or the instance is draining after a stop signal', {}, [
          'unavailable',
        ]),
      },
    },
  };
  paths[ROUTES.metrics] = {
    get: {
      operationId: 'metrics',
      tags: ['operator'],
      summary: 'Prometheus metrics (only when ADMIN_TOKEN is set; not rate-limited)',
      description:
        'Requests by route and status and their durations, rate-limit decisions and their durations, and the database pools, ' +
        'in Prometheus’ text format (docs/reference/metrics.md).',
      security: [{ adminToken: [] }],
      responses: {
        '200': {
          description: "Prometheus' text format",
          content: { 'text/plain; version=0.0.4; charset=utf-8': { schema: { type: 'string' } } },
        },
        ...adminErrors,
      },
    },
  };

  // Every GET is answered to HEAD too; and any request may be refused by the HTTP parser.
  for (const [path, item] of Object.entries(paths)) {
    if (item.get !== undefined) item.head = headOf(item.get as Schema, path);
    for (const operation of Object.values(item) as Schema[]) operation.responses = { ...(operation.responses as Schema), ...refused };
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Paginated collections',
      version: packageJson.version,
      description:
        'Large PostgreSQL tables served in chunks (offset, page, cursor and time pagination, with filters and sorting), under a per-client rate limit. ' +
        'Every error is application/problem+json. Everything under /v1 is rate-limited and answers with the rate-limit headers.',
      contact: { name: `The ${packageJson.name} project` },
      // No license is granted (package.json: private, UNLICENSED); an SPDX reference of its own, as SPDX allows.
      license: { name: `${packageJson.license}: no license is granted`, identifier: `LicenseRef-${packageJson.license}` },
    },
    servers: [{ url: options.serverUrl ?? '/' }],
    tags: [
      { name: 'collections', description: 'The collections and their chunks' },
      { name: 'keys', description: 'API keys' },
      { name: 'operator', description: 'Tiers and keys, behind ADMIN_TOKEN; only when the service runs with one (otherwise 404)' },
      { name: 'service', description: 'Where to start, and health checks' },
    ],
    paths,
    components: {
      schemas,
      responses: { Refused: refusedResponse },
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API key (`pck_…`, from POST /v1/keys or the operator API), or a JWT from the identity provider when the service verifies tokens; without one a client is counted by its IP address and reads only the collections open to anonymous clients',
        },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The ADMIN_TOKEN the service runs with' },
      },
    },
  };
}
