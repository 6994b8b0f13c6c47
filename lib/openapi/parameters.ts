// The query parameters of a collection in the OpenAPI document: the variants' own (lib/pagination/variant-params.ts)
// and the filters, as the registry declares them and as they are spelled on the wire (`priceCents[lt]`).
import { COUNT_MODES } from '../pagination/count.ts';
import { sinceIdField } from '../pagination/cursor.ts';
import { MAX_CURSOR_LENGTH } from '../pagination/cursor-token.ts';
import { MAX_IN_VALUES, MAX_TEXT_LENGTH } from '../pagination/filters.ts';
import { MAX_SAFE } from '../pagination/params.ts';
import type { Collection, FieldType, FilterOp, VariantName } from '../pagination/registry.ts';
import { RFC3339 } from '../pagination/timestamps.ts';
import { takes, variantParams } from '../pagination/variant-params.ts';

type Schema = Record<string, unknown>;

export interface Parameter {
  readonly name: string;
  readonly in: 'query';
  readonly description: string;
  readonly schema: Schema;
  /** The variants of the collection that take the parameter (every one, for a filter). */
  readonly 'x-variants': readonly VariantName[];
}

type VariantParam = (typeof variantParams)[VariantName]['takes'][number];

const timestamp: Schema = {
  type: 'string',
  format: 'date-time',
  pattern: RFC3339.source,
  examples: ['2025-01-02T12:00:00.000001Z'],
};

/**
 * What each parameter of a variant means and takes. Typed over variantParams: a parameter added there does not
 * compile until it is described here. A description returning undefined leaves the parameter out for that collection.
 * Defaults are told in the description, never as a schema's `default`: docs pages fill that in for "Try it",
 * and a parameter sent picks its variant (`limit` and `page` together are a 400).
 */
const variantParamDocs: Record<VariantParam, (collection: Collection) => { description: string; schema: Schema } | undefined> = {
  limit: ({ pageSize }) => ({
    description: `Items in the chunk. Default ${pageSize.default}.`,
    schema: { type: 'integer', minimum: 1, maximum: pageSize.max },
  }),
  offset: () => ({
    description: 'Items skipped before the chunk. Default 0.',
    schema: { type: 'integer', minimum: 0, maximum: MAX_SAFE },
  }),
  page: () => ({
    description: 'The zero-based page; offset = page-size × page, at most 2^53−1. Default 0.',
    schema: { type: 'integer', minimum: 0, maximum: MAX_SAFE },
  }),
  'page-size': ({ pageSize }) => ({
    description: `Items in the chunk; may change from one chunk to the next. Alone, it starts the first chunk of the keyset variant. Default ${pageSize.default}.`,
    schema: { type: 'integer', minimum: 1, maximum: pageSize.max },
  }),
  cursor: () => ({
    description: 'Opaque and signed: taken from a `next`, `prev` or `poll` link the service gave, never written by hand.',
    schema: { type: 'string', minLength: 1, maxLength: MAX_CURSOR_LENGTH },
  }),
  since_id: (collection) => {
    const field = sinceIdField(collection);
    if (field === undefined) return undefined;
    const maximum =
      field.type === 'bigint' ? MAX_SAFE : field.type === 'smallint' ? 2 ** 15 - 1 : field.type === 'integer' ? 2 ** 31 - 1 : undefined;
    return {
      description: `Items with an \`${field.name}\` greater than it, ascending by \`${field.name}\`.`,
      schema: { type: 'integer', minimum: 0, ...(maximum === undefined ? {} : { maximum }) },
    };
  },
  before: ({ timeField }) => ({ description: `Items strictly older (by \`${timeField}\`), newest first.`, schema: timestamp }),
  after: ({ timeField }) => ({ description: `Items strictly newer (by \`${timeField}\`), oldest first.`, schema: timestamp }),
  sort: ({ sortKeys, defaultSort, key: tieBreaker }) => {
    if (sortKeys.length === 0) return undefined;
    const key = `-?(?:${sortKeys.join('|')})`;
    const order = defaultSort.map((k) => (k.descending ? `-${k.field}` : k.field)).join(',');
    return {
      description: `A comma list of ${sortKeys.map((k) => `\`${k}\``).join(', ')}, each optionally prefixed with \`-\` (descending), each at most once; ties are broken by ${tieBreaker.map((k) => `\`${k}\``).join(', ')}. Default: \`${order}\`.`,
      schema: {
        type: 'string',
        pattern: `^${key}(?:,${key})*$`,
        examples: [sortKeys.length > 1 ? `-${sortKeys[1]},${sortKeys[0]}` : sortKeys[0]],
      },
    };
  },
  count: (collection) => ({
    description: `Absent (the default): exact (count(*)) while the planner's estimate of the filtered set is under ${collection.countThreshold} rows, the planner's estimate above it, and the chunk's \`count\` says which; \`exact\`: count(*) of the filtered set, charged by the rows it reads; \`estimated\` (or PostgREST's name \`planned\`): the planner's estimate; \`none\`: no size and no \`last\` link.`,
    schema: { type: 'string', enum: [...COUNT_MODES, 'planned'] },
  }),
};

const opMeaning: Record<FilterOp, string> = {
  eq: 'equals the value',
  ne: 'differs from the value',
  lt: 'is less than the value',
  lte: 'is at most the value',
  gt: 'is greater than the value',
  gte: 'is at least the value',
  in: 'is one of the values, a comma list',
  prefix: 'starts with the value, literally (`%` and `_` are no wildcards)',
  isnull: 'is NULL (`true`) or is not (`false`)',
};

/** The schema of one filter value of a field type (lib/pagination/filters.ts parses them). */
function valueSchema(type: FieldType): Schema {
  switch (type) {
    case 'smallint':
      return { type: 'integer', minimum: -(2 ** 15), maximum: 2 ** 15 - 1, examples: [1] };
    case 'int8':
      return { type: 'integer', examples: [1] };
    case 'decimal':
    case 'float':
      return { type: 'string', pattern: '^(?:[+-]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d{1,4})?|NaN|-?Infinity)$', examples: ['1.5'] };
    case 'boolean':
      return { type: 'boolean' };
    case 'uuid':
      return { type: 'string', format: 'uuid' };
    case 'date':
      return { type: 'string', format: 'date' };
    case 'localTimestamp':
    case 'time':
    case 'interval':
    case 'enum':
    case 'json':
    case 'array':
    case 'tsvector':
    case 'bytea':
      return { type: 'string' };
    case 'integer':
      return { type: 'integer', minimum: -(2 ** 31), maximum: 2 ** 31 - 1, examples: [1] };
    case 'bigint':
      return { type: 'integer', minimum: -MAX_SAFE, maximum: MAX_SAFE, examples: [1] };
    case 'text':
      return { type: 'string', minLength: 1, maxLength: MAX_TEXT_LENGTH, examples: ['a'] };
    case 'timestamp':
      return timestamp;
  }
}

/** A comma list of at most MAX_IN_VALUES values of the field's type. */
function inSchema(type: FieldType): Schema {
  const example = type === 'timestamp' ? '2025-01-02T12:00:00Z,2025-01-03T12:00:00Z' : type === 'text' ? 'a,b' : '1,2';
  return { type: 'string', minLength: 1, examples: [example], description: `At most ${MAX_IN_VALUES} values, none empty` };
}

/** The wire name of a filter: `field` for eq, `field[op]` otherwise. */
function filterName(field: string, op: FilterOp): string {
  return op === 'eq' ? field : `${field}[${op}]`;
}

/** Every query parameter a collection takes: its variants' parameters, then its filters. */
export function collectionParameters(collection: Collection): Parameter[] {
  const parameters: Parameter[] = [];
  const names = new Set(collection.variants.flatMap((variant) => variantParams[variant].takes));
  for (const name of names) {
    const doc = variantParamDocs[name](collection);
    if (doc === undefined) continue;
    const variants = collection.variants.filter((variant) => takes(variant, name));
    const selects = variants.filter((variant) => (variantParams[variant].selects as readonly string[]).includes(name));
    const picks = selects.length > 0 ? ` Picks ${selects.join(' or ')} pagination.` : '';
    parameters.push({
      name,
      in: 'query',
      description: `${doc.description}${picks} Taken by ${variants.join(', ')} pagination.`,
      schema: doc.schema,
      'x-variants': variants,
    });
  }
  for (const [field, ops] of Object.entries(collection.filters)) {
    const type = collection.fields.get(field)!.type;
    for (const op of ops) {
      parameters.push({
        name: filterName(field, op),
        in: 'query',
        description: `Filter: \`${field}\` ${opMeaning[op]}.`,
        schema: op === 'in' ? inSchema(type) : op === 'isnull' ? { type: 'boolean' } : valueSchema(type),
        'x-variants': collection.variants,
      });
    }
  }
  return parameters;
}
