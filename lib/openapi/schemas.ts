// The schemas of the OpenAPI document: a collection's item and its chunk per variant (lib/pagination/chunk.ts
// and the variants), the links, and the one problem+json schema with every error code (lib/http/errors.ts).
import { errorStatus } from '../http/errors.ts';
import type { Collection, Field, FieldType, VariantName } from '../pagination/registry.ts';
import { PRINTED_EXCEPTION, PRINTED_TIMESTAMP } from '../pagination/timestamps.ts';
import { PRINTED, type TypeFacts } from '../pagination/values.ts';

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

const INT2: Schema = { type: 'integer', minimum: -(2 ** 15), maximum: 2 ** 15 - 1 };
const INT4: Schema = { type: 'integer', minimum: -(2 ** 31), maximum: 2 ** 31 - 1 };
const SPECIAL_NUMBERS = ['NaN', 'Infinity', '-Infinity'];
/** Dates and UTC timestamps printed that RFC 3339 cannot write: BC, years past 9999, ±infinity (docs/reference/api.md, "Values"). */
const DATE_EXCEPTIONS = /^(?:\d{4,}-\d{2}-\d{2} BC|\d{5,}-\d{2}-\d{2}|-?infinity)$/;
const TIMESTAMP_NOTE = 'RFC 3339, UTC, six fractional digits';
const PRINTED_UTC: Schema = { type: 'string', format: 'date-time', pattern: PRINTED_TIMESTAMP.source };

/**
 * One value, not null, as items print it (docs/reference/api.md, "Values"): a field's or an array element's.
 * A form RFC 3339 or JSON Schema has a format for says it (date, date-time, uuid, int64); the exceptions PostgreSQL
 * prints beside it are a second branch, each branch typed, so that generated types stay `string` or `number`.
 */
function printedSchema(type: FieldType, facts: TypeFacts): Schema {
  switch (type) {
    case 'integer':
      return INT4;
    case 'smallint':
      return INT2;
    case 'int8':
      // No maximum: 2^63 − 1 has no exact double, and a bound the document rounds would be wrong.
      return { type: 'integer', format: 'int64' };
    case 'decimal':
      // numeric(p,s) holds NaN but no infinity (PostgreSQL refuses one: "numeric field overflow").
      return { anyOf: [{ type: 'number' }, { type: 'string', enum: facts.precision === undefined ? SPECIAL_NUMBERS : ['NaN'] }] };
    case 'float':
      return { anyOf: [{ type: 'number' }, { type: 'string', enum: SPECIAL_NUMBERS }] };
    case 'boolean':
      return { type: 'boolean' };
    case 'text':
      if (facts.length === undefined) return { type: 'string' };
      // char(n) is padded to its n characters; varchar(n) holds at most n.
      return facts.name === 'bpchar'
        ? { type: 'string', minLength: facts.length, maxLength: facts.length }
        : { type: 'string', maxLength: facts.length };
    case 'uuid':
      return { type: 'string', format: 'uuid', pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' };
    case 'enum':
      return facts.labels?.length ? { type: 'string', enum: [...facts.labels] } : { type: 'string' };
    case 'date':
      return {
        anyOf: [
          { type: 'string', format: 'date' },
          { type: 'string', pattern: DATE_EXCEPTIONS.source },
        ],
      };
    case 'timestamp':
      return { anyOf: [PRINTED_UTC, { type: 'string', pattern: PRINTED_EXCEPTION.source }] };
    case 'localTimestamp':
      return { type: 'string', pattern: PRINTED.localTimestamp.source };
    case 'time':
      return { type: 'string', pattern: (facts.name === 'timetz' ? PRINTED.timetz : PRINTED.time).source };
    case 'interval':
      return { type: 'string', pattern: PRINTED.interval.source };
    case 'json':
      return {};
    case 'array':
      // A field's array is described by runtimeFieldSchema; an element is never an array (PostgreSQL's are multi-dimensional instead).
      return { type: 'array' };
    case 'tsvector':
      return { type: 'string' };
    case 'bytea':
      return { type: 'string', pattern: '^\\\\x[0-9a-f]*$' };
  }
}

/** What a value of a type is, in words, for a field's or an array element's description (docs/reference/api.md, "Values"). */
function printedNote(type: FieldType, facts: TypeFacts): string | undefined {
  switch (type) {
    case 'int8':
      return "exact, written from PostgreSQL's text past 2^53 too (JSON.parse's context.source or a big-number parser keeps every digit)";
    case 'decimal': {
      const exact = "exact: a JSON number written from PostgreSQL's text, every digit and trailing zero kept";
      const { precision, scale } = facts;
      if (precision === undefined) return `${exact}; NaN, Infinity and -Infinity as strings`;
      const digits = scale! >= 0 ? `${scale} of them after the point` : `rounded to a multiple of 10^${-scale!}`;
      return `${exact}, at most ${precision} digits, ${digits}; NaN as a string`;
    }
    case 'float':
      return "a JSON number from PostgreSQL's text, its shortest exact form; NaN, Infinity and -Infinity as strings";
    case 'text':
      if (facts.length === undefined) return undefined;
      return facts.name === 'bpchar' ? `padded with spaces to ${facts.length} characters` : `at most ${facts.length} characters`;
    case 'uuid':
      return 'lower case';
    case 'enum':
      return 'one of its labels';
    case 'date':
      return 'YYYY-MM-DD (RFC 3339 full-date); a BC date with " BC", a year past 9999 with all its digits, infinity and -infinity';
    case 'timestamp':
      return `${TIMESTAMP_NOTE}; BC with " BC", a year past 9999 with all its digits, infinity and -infinity`;
    case 'localTimestamp':
      return 'YYYY-MM-DDTHH:MM:SS.ffffff, six fractional digits, no offset; BC with " BC", infinity and -infinity';
    case 'time':
      return facts.name === 'timetz'
        ? 'HH:MM:SS, fractional digits only where there are some, then the offset (+05:30, -11)'
        : 'HH:MM:SS, fractional digits only where there are some (24:00:00 too)';
    case 'interval':
      return 'an ISO 8601 duration with every part, each signed as PostgreSQL keeps it, seconds with six digits';
    case 'json':
      return 'any JSON value: the document itself, numbers written as stored';
    case 'tsvector':
      return 'its text';
    case 'bytea':
      return '\\x and lower-case hex digits';
    case 'array': {
      const { element } = facts;
      if (element === undefined) return undefined;
      const rows = element.nested ? "a multi-dimensional array's rows are arrays in turn" : 'a multi-dimensional array flattened';
      return `a JSON array of its elements, each printed as its type is, null for a NULL one; ${rows}`;
    }
    default:
      return undefined;
  }
}

/** A field's or an element's description: its SQL type (a domain with what it is over), and how its values are printed. */
function describe(type: FieldType, facts: TypeFacts): string {
  const [domain, ...inner] = facts.domains;
  const sqlType = domain === undefined ? facts.sqlType : `${domain} (a domain over ${[...inner, facts.sqlType].join(', over ')})`;
  const note = printedNote(type, facts);
  return note === undefined ? sqlType : `${sqlType}: ${note}`;
}

/** A schema that also takes null when `nullable`: a type list or an enum grows `null`, an anyOf a branch; an any schema takes it already. */
function orNull(schema: Schema, nullable = true): Schema {
  if (!nullable) return schema;
  if (Array.isArray(schema.anyOf)) return { ...schema, anyOf: [...schema.anyOf, { type: 'null' }] };
  if (schema.type === undefined) return schema;
  return {
    ...schema,
    type: [...[schema.type].flat(), 'null'],
    ...(Array.isArray(schema.enum) ? { enum: [...schema.enum, null] } : {}),
  };
}

/**
 * PostgreSQL's MAXDIM: an array has at most 6 dimensions. A column's type does not say how many its values have
 * (int[] holds a 2-D value as well), so a nested array's items are its elements or rows down to the sixth dimension.
 * Written out, not a schema referring to itself: openapi-typescript's types of one do not compile (TS2502).
 */
const MAX_DIMENSIONS = 6;

/**
 * A field: its value as printed, its description (from the catalog's facts of its type), null where the column
 * allows it. An array's elements may always be NULL: PostgreSQL has no NOT NULL for them.
 */
function fieldSchema(field: Field): Schema {
  const { facts } = field.value;
  const { element } = facts;
  let schema = printedSchema(field.type, facts);
  if (field.type === 'array' && element !== undefined) {
    const value = orNull(printedSchema(element.type, element.facts));
    // to_json nests a multi-dimensional array's rows; elements printed one by one (dates, times) are flattened.
    let items = value;
    const nests = element.nested && (value.type !== undefined || value.anyOf !== undefined);
    for (let dimension = 1; nests && dimension < MAX_DIMENSIONS; dimension++) {
      items = { anyOf: [...((value.anyOf as Schema[] | undefined) ?? [value]), { type: 'array', items }] };
    }
    schema = { type: 'array', items: { ...items, description: describe(element.type, element.facts) } };
  }
  return orNull({ ...schema, description: describe(field.type, facts) }, field.nullable);
}

/** An item: the registry's fields in JSON order, each of its type, null where the column allows it. */
function itemSchema(collection: Collection): Schema {
  const properties: Record<string, Schema> = {};
  for (const [name, field] of collection.fields) properties[name] = fieldSchema(field);
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

/** The chunk of each variant (docs/reference/api.md, "The chunk" and "Links"); typed over the variants, so a new one needs its entry. */
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
