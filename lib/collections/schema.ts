// The collections file's schema (docs/reference/collections-file.md): valibot, from which the file's types and its JSON Schema both come.
import * as v from 'valibot';
import { COLLECTION_NAME, FIELD_NAME } from './names.ts';

/** The pagination variants a collection may offer (docs/reference/api.md, "Choosing the variant"). */
const VARIANTS = ['offset', 'page', 'cursor', 'time'] as const;
export type Variant = (typeof VARIANTS)[number];

/** Filter operators: `{field}[{op}]=`; `isnull` takes true (IS NULL) or false (IS NOT NULL). (Not `null`, which YAML reads as no value.) */
const OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'prefix', 'isnull'] as const;
export type Operator = (typeof OPERATORS)[number];

const FIELD_NAMES = ['asIs', 'camelCase'] as const;

const columnName = v.pipe(v.string('must be a column name'), v.minLength(1, 'must be a column name'));
const columnList = (what: string) =>
  v.pipe(v.array(columnName, `must be a list of column names (${what})`), v.minLength(1, `must name at least one column (${what})`));
/** A claim's name, or a dotted path into nested claims: non-empty parts between the dots. */
const claimPath = v.pipe(
  v.string('must be a claim name, or a dotted path of them (app_metadata.tenant)'),
  v.regex(/^[^.]+(?:\.[^.]+)*$/, 'must be a claim name, or a dotted path of them (app_metadata.tenant), no part empty'),
);
/** A mapping, not a list: valibot's record reads a list as an object of its indexes. */
const mapping = (message: string) =>
  v.custom<Record<string, unknown>>((input) => typeof input === 'object' && input !== null && !Array.isArray(input), message);
const FIELDS_MESSAGE = 'must map column names to field names (Größe: size)';
const FIELD_NAME_MESSAGE = 'must be a field name: an ASCII letter or _, then ASCII letters, digits and _';
const count = (minimum: number, what: string) =>
  v.pipe(v.number(what), v.integer(what), v.minValue(minimum, what), v.maxValue(Number.MAX_SAFE_INTEGER, what));

const collection = v.strictObject(
  {
    relation: v.pipe(
      v.string('must be a relation name, e.g. public.film'),
      v.minLength(1, 'must be a relation name, e.g. public.film'),
      v.description(
        'The table, view, materialized view or partitioned table, schema-qualified (public when not): each part exactly as in the catalog, double-quoted where it holds a dot or a quote.',
      ),
    ),
    name: v.optional(
      v.pipe(
        v.string('must be a collection name'),
        v.regex(COLLECTION_NAME, 'must start with a letter and hold only letters, digits, _ and -'),
        v.description("The collection's name, its path under /v1. Default: the relation's name."),
      ),
    ),
    columns: v.optional(
      v.pipe(
        columnList('columns'),
        v.description('The columns served, in the order items show them. Default: every column of a supported type, in table order.'),
      ),
    ),
    fieldNames: v.optional(
      v.pipe(
        v.picklist(FIELD_NAMES, 'must be asIs or camelCase'),
        v.description(
          'How items name the columns: asIs (default), or camelCase (release_year as releaseYear). Everything else in the file names columns as the catalog does.',
        ),
      ),
    ),
    fields: v.optional(
      v.pipe(
        mapping(FIELDS_MESSAGE),
        v.record(columnName, v.pipe(v.string(FIELD_NAME_MESSAGE), v.regex(FIELD_NAME, FIELD_NAME_MESSAGE)), FIELDS_MESSAGE),
        v.minEntries(1, 'must name at least one column and its field name'),
        v.description(
          'The field names of single columns, column: field (Größe: size), over fieldNames: for a column whose name, as it is or in camelCase, is no field name (a field name is ASCII), or to rename one. The columns must be served.',
        ),
      ),
    ),
    key: v.optional(
      v.pipe(
        columnList('key'),
        v.description(
          "The columns that identify an item, the keyset pagination's tie-breaker and what cursors carry. Default: the primary key, or else a unique key over NOT NULL columns; a view needs one named.",
        ),
      ),
    ),
    variants: v.optional(
      v.pipe(
        v.array(v.picklist(VARIANTS, 'must be offset, page, cursor or time'), 'must be a list of variants'),
        v.minLength(1, 'must name at least one variant'),
        v.description('The pagination variants offered. Default: offset, page and cursor.'),
      ),
    ),
    defaultVariant: v.optional(
      v.pipe(
        v.picklist(VARIANTS, 'must be offset, page, cursor or time'),
        v.description('The variant of a request that picks none. Default: cursor when offered, else the first variant.'),
      ),
    ),
    timeColumn: v.optional(v.pipe(columnName, v.description('The timestamp column the time variant pages over; required with it.'))),
    filters: v.optional(
      v.pipe(
        v.record(
          columnName,
          v.array(v.picklist(OPERATORS, `must be one of ${OPERATORS.join(', ')}`), 'must be a list of operators'),
          'must map column names to lists of operators',
        ),
        v.description('The filters offered: each column with its operators. Default: eq on every column that leads a btree index.'),
      ),
    ),
    sort: v.optional(
      v.pipe(
        v.array(columnName, 'must be a list of column names'),
        v.description(
          'The columns a request may sort by. Default: every column whose order a btree index serves (the column, then the key).',
        ),
      ),
    ),
    order: v.optional(
      v.pipe(
        v.union([v.string(), v.array(v.string())], 'must be a column, a comma list of columns, or a list, each optionally prefixed with -'),
        v.description('The default order: columns, each prefixed with - for descending; the key follows as tie-breaker. Default: the key.'),
      ),
    ),
    unindexedSorts: v.optional(
      v.pipe(
        v.boolean('must be true or false'),
        v.description(
          'true: accept sorts no btree index serves, each chunk then reading and sorting the filtered rows (and priced so). Default: false, which refuses them.',
        ),
      ),
    ),
    access: v.optional(
      v.pipe(
        v.strictObject(
          {
            anonymous: v.optional(
              v.pipe(
                v.boolean('must be true or false'),
                v.description(
                  'Whether clients without credentials read the collection, at the anonymous tier. Default: true, false with rows (never read anonymously).',
                ),
              ),
            ),
            rows: v.optional(
              v.pipe(
                mapping('must map column names to claims (tenant_id: tenant)'),
                v.record(columnName, claimPath, 'must map column names to claims (tenant_id: tenant)'),
                v.minEntries(1, 'must name at least one column and its claim'),
                v.description(
                  "A client reads only the rows whose columns equal its claims: column: claim, a dotted path for a nested claim (app_metadata.tenant); an array claim matches any of its values. The column need not be served, and the indexes serving the collection's orders must lead with these columns.",
                ),
              ),
            ),
          },
          'must be an object of anonymous and rows',
        ),
        v.description(
          'Who reads the collection, and which of its rows (docs/reference/collections-file.md, "Access"). Default: everyone, every row.',
        ),
      ),
    ),
    pageSize: v.optional(
      v.pipe(
        v.strictObject(
          {
            default: v.optional(count(1, 'must be a whole number from 1')),
            max: v.optional(count(1, 'must be a whole number from 1')),
          },
          'must be an object of default and max',
        ),
        v.description('Items a chunk holds when the request does not say, and at most. Default: 20 and 100.'),
      ),
    ),
    countThreshold: v.optional(
      v.pipe(
        count(0, 'must be a whole number from 0'),
        v.description("The default count is exact while the planner's estimate is under this many rows. Default: 10000."),
      ),
    ),
    cost: v.optional(
      v.pipe(
        v.strictObject(
          {
            itemsPerUnit: v.optional(count(1, 'must be a whole number from 1')),
            countedPerUnit: v.optional(count(1, 'must be a whole number from 1')),
            indexed: v.optional(
              v.record(columnName, count(1, 'must be a whole number from 1'), 'must map sort columns to rows skipped per unit'),
            ),
            unindexedSort: v.optional(count(1, 'must be a whole number from 1')),
          },
          'must be an object of itemsPerUnit, countedPerUnit, indexed and unindexedSort',
        ),
        v.description(
          "Overrides of the cost rule's measured defaults (docs/reference/costs.md, \"The rule\"): items per unit (50), rows counted per unit (5000), rows an offset skips per unit along each sort column's index (10000 along the key's, 1000 along others), and the units of a sort no index serves (from the relation's estimated rows).",
        ),
      ),
    ),
  },
  (issue) => `has no setting ${String(issue.input === undefined ? issue.received : issue.expected)}`,
);

/** The whole file: its collections, and optionally the JSON Schema an editor completes it with. */
export const collectionsFileSchema = v.strictObject(
  {
    $schema: v.optional(v.string('must be the URL or path of the JSON Schema')),
    collections: v.pipe(
      v.array(collection, 'must be a list of collections'),
      v.minLength(1, 'must list at least one collection'),
      v.description('The tables and views served, one collection each.'),
    ),
  },
  'must be an object with collections',
);

export type CollectionsFile = v.InferOutput<typeof collectionsFileSchema>;
export type CollectionEntry = CollectionsFile['collections'][number];
