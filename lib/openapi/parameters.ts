// The query parameters of a collection in the OpenAPI document: the variants' own (lib/pagination/variant-params.ts)
// and the filters, as the registry declares them and as they are spelled on the wire (`priceCents[lt]`).
import { COUNT_MODES } from '../pagination/count.ts';
import { sinceIdField } from '../pagination/cursor.ts';
import { MAX_CURSOR_LENGTH } from '../pagination/cursor-token.ts';
import { MAX_IN_VALUES, MAX_TEXT_LENGTH } from '../pagination/filters.ts';
import { MAX_SAFE } from '../pagination/params.ts';
import type { Collection, Field, FilterOp, VariantName } from '../pagination/registry.ts';
import { RFC3339 } from '../pagination/timestamps.ts';
import { ACCEPTED } from '../pagination/values.ts';
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

/** `before` and `after`: RFC 3339 with an offset over a timestamptz, a timestamp without time zone over one. */
function timeSchema({ fields, timeField }: Collection): Schema {
  const field = fields.get(timeField ?? '');
  return field?.type === 'localTimestamp' ? valueSchema(field) : timestamp;
}

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
    const description = `Items with an \`${field.name}\` greater than it, ascending by \`${field.name}\`.`;
    // From 0 to the key's largest value: an int8's as its digits too, as its filters take it.
    if (field.type === 'int8') {
      return {
        description,
        schema: {
          anyOf: [
            { type: 'integer', minimum: 0, format: 'int64' },
            { type: 'string', pattern: '^\\d{1,19}$' },
          ],
          examples: [0],
        },
      };
    }
    const maximum = field.type === 'smallint' ? 2 ** 15 - 1 : 2 ** 31 - 1;
    return { description, schema: { type: 'integer', minimum: 0, maximum } };
  },
  before: (collection) => ({
    description: `Items strictly older (by \`${collection.timeField}\`), newest first.`,
    schema: timeSchema(collection),
  }),
  after: (collection) => ({
    description: `Items strictly newer (by \`${collection.timeField}\`), oldest first.`,
    schema: timeSchema(collection),
  }),
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

/** A pattern's source without its anchors, to be composed into another. */
function inner(pattern: RegExp): string {
  return pattern.source.replace(/^\^/, '').replace(/\$$/, '');
}

const TIMETZ = `^(?:${inner(ACCEPTED.time)})(?:${inner(ACCEPTED.zone)})$`;
/** int8 as its digits or as a number: a client's number past 2^53 is not the value it meant. */
const INT8_DIGITS = '^-?\\d{1,19}$';

/** A pattern that matches the text literally (ECMA-262 in unicode mode, as JSON Schema reads it: only syntax characters escaped). */
function literal(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

/**
 * The schema of one filter value of a field (lib/pagination/values.ts parses them): the forms the field's type takes
 * (ACCEPTED), its range, an enum's labels. Each has an example, which tests/openapi sends.
 */
function valueSchema(field: Field): Schema {
  const facts = field.value.facts;
  switch (field.type) {
    case 'smallint':
      return { type: 'integer', minimum: -(2 ** 15), maximum: 2 ** 15 - 1, examples: [1, 2] };
    case 'integer':
      return { type: 'integer', minimum: -(2 ** 31), maximum: 2 ** 31 - 1, examples: [1, 2] };
    case 'int8':
      return {
        anyOf: [
          { type: 'integer', format: 'int64' },
          { type: 'string', pattern: INT8_DIGITS },
        ],
        examples: ['9007199254740993', '1'],
      };
    case 'decimal':
    case 'float':
      return {
        anyOf: [{ type: 'number' }, { type: 'string', pattern: `^(?:${inner(ACCEPTED.decimal)}|NaN|-?Infinity)$` }],
        examples: ['1.5', '2'],
      };
    case 'boolean':
      return { type: 'boolean' };
    case 'uuid':
      return {
        type: 'string',
        format: 'uuid',
        pattern: ACCEPTED.uuid.source,
        examples: ['00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000002'],
      };
    case 'enum':
      return facts.labels?.length ? { type: 'string', enum: [...facts.labels] } : { type: 'string' };
    case 'date':
      return { type: 'string', format: 'date', examples: ['2020-02-01', '2020-03-01'] };
    case 'localTimestamp':
      return { type: 'string', pattern: ACCEPTED.localTimestamp.source, examples: ['2024-01-02T10:00:00.000001'] };
    case 'time':
      return facts.name === 'timetz'
        ? { type: 'string', pattern: TIMETZ, examples: ['10:30:00+02:00'] }
        : { type: 'string', pattern: ACCEPTED.time.source, examples: ['10:30:00'] };
    case 'interval':
      return { type: 'string', pattern: ACCEPTED.interval.source, examples: ['P1DT2H'] };
    case 'text':
      return { type: 'string', minLength: 1, maxLength: MAX_TEXT_LENGTH, examples: ['a', 'b'] };
    case 'timestamp':
      return timestamp;
    // No filter takes these (lib/collections/kinds.ts).
    case 'json':
    case 'array':
    case 'tsvector':
    case 'bytea':
      return { type: 'string' };
  }
}

/** One value of an `in` list, as a pattern: what valueSchema takes, without commas. */
function listValue(field: Field): string {
  const labels = field.value.facts.labels;
  switch (field.type) {
    case 'smallint':
    case 'integer':
    case 'int8':
      return '-?\\d{1,20}';
    case 'decimal':
    case 'float':
      return `${inner(ACCEPTED.decimal)}|NaN|-?Infinity`;
    case 'uuid':
      return inner(ACCEPTED.uuid);
    case 'enum':
      return labels?.length ? labels.map(literal).join('|') : '[^,]+';
    case 'date':
      return inner(ACCEPTED.date);
    case 'localTimestamp':
      return inner(ACCEPTED.localTimestamp);
    case 'time':
      return field.value.facts.name === 'timetz' ? inner(new RegExp(TIMETZ)) : inner(ACCEPTED.time);
    case 'interval':
      return inner(ACCEPTED.interval);
    case 'timestamp':
      return inner(RFC3339);
    default:
      return '[^,]+';
  }
}

/** A comma list of at most MAX_IN_VALUES values of the field's type; its example, two of valueSchema's (or one twice). */
function inSchema(field: Field): Schema {
  const value = listValue(field);
  const one = valueSchema(field);
  const examples = ((one.enum ?? one.examples ?? []) as unknown[]).slice(0, 2);
  return {
    type: 'string',
    pattern: `^(?:${value})(?:,(?:${value}))*$`,
    examples: [(examples.length === 1 ? [examples[0], examples[0]] : examples).join(',')],
    description: `At most ${MAX_IN_VALUES} values, none empty`,
  };
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
    const filtered = collection.fields.get(field)!;
    for (const op of ops) {
      parameters.push({
        name: filterName(field, op),
        in: 'query',
        description: `Filter: \`${field}\` ${opMeaning[op]}.`,
        schema: op === 'in' ? inSchema(filtered) : op === 'isnull' ? { type: 'boolean' } : valueSchema(filtered),
        'x-variants': collection.variants,
      });
    }
  }
  return parameters;
}
