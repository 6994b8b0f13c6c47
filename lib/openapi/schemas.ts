// The schemas of the OpenAPI document: a collection's item and its chunk per variant (lib/pagination/chunk.ts
// and the variants), the links, and the one problem+json schema with every error code (lib/http/errors.ts).
import { errorStatus } from '../http/errors.ts';
import type { Collection, FieldType, VariantName } from '../pagination/registry.ts';
import { PRINTED_TIMESTAMP } from '../pagination/timestamps.ts';

type Schema = Record<string, unknown>;

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** "products" to "Products", "page" to "Page": the parts of a schema's name. */
function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

function itemSchemaName(collection: Collection): string {
  return `${pascal(collection.name)}Item`;
}

function chunkSchemaName(collection: Collection, variant: VariantName): string {
  return `${pascal(collection.name)}${pascal(variant)}Chunk`;
}

const fieldSchemas: Record<FieldType, Schema> = {
  integer: { type: 'integer', minimum: -(2 ** 31), maximum: 2 ** 31 - 1 },
  bigint: { type: 'integer', minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER },
  text: { type: 'string' },
  timestamp: {
    type: 'string',
    format: 'date-time',
    pattern: PRINTED_TIMESTAMP.source,
    description: 'RFC 3339, UTC, six fractional digits',
  },
  // A runtime collection's (lib/pagination/values.ts; docs/api.md, "Values").
  smallint: { type: 'integer', minimum: -(2 ** 15), maximum: 2 ** 15 - 1 },
  int8: { type: 'integer', description: "bigint, exact (written from PostgreSQL's text, past 2^53 too)" },
  decimal: { type: ['number', 'string'], description: 'numeric, exact; NaN and ±Infinity as strings' },
  float: { type: ['number', 'string'], description: 'real or double precision; NaN and ±Infinity as strings' },
  boolean: { type: 'boolean' },
  uuid: { type: 'string', format: 'uuid' },
  enum: { type: 'string' },
  date: { type: 'string', description: 'YYYY-MM-DD' },
  localTimestamp: { type: 'string', description: 'timestamp without time zone, YYYY-MM-DDTHH:MM:SS.ffffff' },
  time: { type: 'string' },
  interval: { type: 'string', description: 'ISO 8601 duration, every part: P1Y2M3DT4H5M6.000000S' },
  json: {},
  array: { type: 'array' },
  tsvector: { type: 'string' },
  bytea: { type: 'string', description: 'hex' },
};

/** An item: the registry's fields in JSON order, each of its type, null where the column allows it. */
function itemSchema(collection: Collection): Schema {
  const properties: Record<string, Schema> = {};
  for (const [name, field] of collection.fields) {
    const schema = fieldSchemas[field.type];
    const types = schema.type === undefined ? undefined : [schema.type].flat();
    properties[name] = !field.nullable || types === undefined ? schema : { ...schema, type: [...types, 'null'] };
  }
  return { type: 'object', properties, required: [...collection.fields.keys()], additionalProperties: false };
}

interface ChunkDoc {
  /** The variant's own fields, before the items; `required: false` for those a count mode leaves out. */
  readonly fields: Record<string, { description: string; required: boolean; schema?: Schema }>;
  /** The link relations of its `_links`, and whether each is always there. */
  readonly links: Record<string, { description: string; required: boolean }>;
  /** A rule over the links beyond which are required. */
  readonly linkRule?: Schema;
}

/** The field that says whether a chunk's size is a count or the planner's estimate. */
function countField(sized: string) {
  return {
    description: `Whether \`${sized}\` is \`exact\` (counted) or \`estimated\` (the planner's estimate: the default above the collection's threshold, or count=estimated); absent with count=none`,
    required: false,
    schema: { type: 'string', enum: ['exact', 'estimated'] },
  };
}

/** The chunk of each variant (docs/api.md, "The chunk" and "Links"); typed over the variants, so a new one needs its entry. */
const chunkDocs: Record<VariantName, ChunkDoc> = {
  offset: {
    fields: {
      offset: { description: 'Items skipped', required: true },
      limit: { description: 'Items asked for', required: true },
      size: {
        description: "Items in the filtered set, or the planner's estimate of it (see `count`); absent with count=none",
        required: false,
      },
      count: countField('size'),
    },
    links: {
      self: { description: 'This chunk', required: true },
      next: { description: 'offset + limit; absent on the last chunk', required: false },
      prev: { description: 'offset − limit (at least 0); absent at offset 0', required: false },
      first: { description: 'offset 0', required: true },
      last: { description: 'The last chunk on the grid of this offset; absent without a size', required: false },
    },
  },
  page: {
    fields: {
      page: { description: 'The zero-based page', required: true },
      pageSize: { description: 'Items asked for', required: true },
      totalPages: {
        description: '⌈size / pageSize⌉, of the size or of its estimate (see `count`); absent with count=none',
        required: false,
      },
      count: countField('totalPages'),
    },
    links: {
      self: { description: 'This chunk', required: true },
      next: { description: 'page + 1; absent on the last chunk', required: false },
      prev: { description: 'page − 1; absent on page 0', required: false },
      first: { description: 'page 0', required: true },
      last: { description: 'page totalPages − 1; absent without a size', required: false },
    },
  },
  cursor: {
    fields: { pageSize: { description: 'Items asked for', required: true } },
    links: {
      self: { description: 'This chunk', required: true },
      next: { description: 'The chunk after the last item; absent on the last chunk', required: false },
    },
  },
  time: {
    fields: { pageSize: { description: 'Items asked for', required: true } },
    links: {
      self: { description: 'This chunk', required: true },
      next: { description: "Further in the chunk's direction; absent on the last chunk", required: false },
      prev: { description: 'The other direction, from the first item', required: false },
      poll: {
        description: 'Instead of next, on a chunk moving to newer items that reached the newest: fetch it later for what arrived',
        required: false,
      },
    },
    // A chunk moving to older items always has prev; one moving to newer items has poll once it reached the newest.
    linkRule: { anyOf: [{ required: ['prev'] }, { required: ['poll'] }] },
  },
};

function required(entries: Record<string, { required: boolean }>): string[] {
  return Object.entries(entries)
    .filter(([, entry]) => entry.required)
    .map(([name]) => name);
}

/** The chunk of one variant of a collection: its fields, the items array named after the collection, `_links`. */
function chunkSchema(collection: Collection, variant: VariantName): Schema {
  const doc = chunkDocs[variant];
  const fields = Object.fromEntries(
    Object.entries(doc.fields).map(([name, field]) => [
      name,
      { ...(field.schema ?? { type: 'integer', minimum: 0 }), description: field.description },
    ]),
  );
  const links = Object.fromEntries(
    Object.entries(doc.links).map(([rel, link]) => [rel, { ...ref('Link'), description: link.description }]),
  );
  return {
    type: 'object',
    title: `A chunk of ${collection.name}, ${variant} pagination`,
    properties: {
      ...fields,
      [collection.name]: { type: 'array', items: ref(itemSchemaName(collection)), maxItems: collection.pageSize.max },
      _links: { type: 'object', properties: links, required: required(doc.links), additionalProperties: false, ...doc.linkRule },
    },
    required: [...required(doc.fields), collection.name, '_links'],
    additionalProperties: false,
  };
}

/** The schema of a collection's 200: its one chunk, or oneOf the chunks of its variants (the request's parameters pick one). */
export function chunkResponseSchema(collection: Collection): Schema {
  const refs = collection.variants.map((variant) => ref(chunkSchemaName(collection, variant)));
  return refs.length === 1 ? refs[0]! : { oneOf: refs };
}

/** A collection's schemas: its item and one chunk per variant. */
export function collectionSchemas(collection: Collection): Record<string, Schema> {
  const schemas: Record<string, Schema> = { [itemSchemaName(collection)]: itemSchema(collection) };
  for (const variant of collection.variants) schemas[chunkSchemaName(collection, variant)] = chunkSchema(collection, variant);
  return schemas;
}

/** The error codes of one status, from the one table of codes. */
export function codesOf(status: number): string[] {
  return Object.entries(errorStatus)
    .filter(([, s]) => s === status)
    .map(([code]) => code);
}

/** The schemas every document has: a link, and the problem (RFC 9457) with every code the service emits. */
export function sharedSchemas(): Record<string, Schema> {
  const codes = Object.keys(errorStatus);
  const statuses = [...new Set(Object.values(errorStatus))].sort();
  return {
    Link: {
      type: 'object',
      properties: { href: { type: 'string', format: 'uri', description: 'An absolute URL' } },
      required: ['href'],
      additionalProperties: false,
    },
    Problem: {
      type: 'object',
      description: `application/problem+json (RFC 9457). Codes by status: ${statuses.map((s) => `${s} ${codesOf(s).join(', ')}`).join('; ')}.`,
      properties: {
        type: { type: 'string', const: 'about:blank' },
        title: { type: 'string', description: "The status's reason phrase" },
        status: { type: 'integer', enum: statuses },
        detail: { type: 'string' },
        code: { type: 'string', enum: codes, description: 'Machine-readable: one of the codes listed' },
        invalid_params: {
          type: 'array',
          description: 'The named parts of the request (parameters, body fields, headers) that are wrong, one entry each',
          items: {
            type: 'object',
            properties: { name: { type: 'string' }, reason: { type: 'string' } },
            required: ['name', 'reason'],
            additionalProperties: false,
          },
        },
        requestId: { type: 'string', description: "The request's X-Request-Id, to quote" },
      },
      required: ['type', 'title', 'status', 'detail', 'code', 'requestId'],
      additionalProperties: false,
    },
  };
}
