// Property: no value makes a 500. A table with a column of every supported type, holding NULLs, NaN, ±Infinity, BC
// dates, ±infinity and each type's extremes, served with every operator each type offers; random requests (filters
// with adversarial values, sorts, sizes, positions) are a 200 whose walk to the end returns what SQL returns, or a
// 400 naming a parameter the request sent (docs/reference/api.md, "Values").
import fc from 'fast-check';
import type { Sql } from 'postgres';
import t from 'tap';
import { operatorsFor, sortable } from '../../lib/collections/kinds.ts';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import { loadRegistry } from '../../lib/pagination/runtime.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';

/** A column of the table: its SQL type, the type a filter's value is cast to in the oracle, and the values its rows hold. */
interface Column {
  readonly sql: string;
  readonly cast: string;
  /** SQL literals, cycled through the rows (NULL among them where the column may hold it). */
  readonly values: readonly string[];
}

const COLUMNS: Record<string, Column> = {
  small: { sql: 'smallint', cast: 'int2', values: ['-32768', '32767', '0', 'null', '-1'] },
  whole: { sql: 'integer', cast: 'int4', values: ['-2147483648', '2147483647', '0', 'null', '7'] },
  big: { sql: 'bigint', cast: 'int8', values: ['-9223372036854775808', '9223372036854775807', '9007199254740993', 'null', '0'] },
  amount: {
    sql: 'numeric',
    cast: 'numeric',
    values: [
      "'NaN'",
      "'Infinity'",
      "'-Infinity'",
      '1e400',
      '123456789012345678901234567890.123456789',
      '-0.000000000000000000001',
      '0',
      'null',
    ],
  },
  price: { sql: 'numeric(7,2)', cast: 'numeric', values: ['99999.99', '-99999.99', "'NaN'", '0.01', 'null'] },
  r: {
    sql: 'real',
    cast: 'float4',
    values: ["'NaN'", "'Infinity'", "'-Infinity'", "'3.4028235e38'", "'-3.4028235e38'", "'1.4e-45'", "'-0'", "'1.5e-7'", 'null'],
  },
  d: {
    sql: 'double precision',
    cast: 'float8',
    values: [
      "'NaN'",
      "'Infinity'",
      "'-Infinity'",
      "'1.7976931348623157e308'",
      "'5e-324'",
      "'-0'",
      '0.1',
      'null',
      "'-2.2250738585072014e-308'",
    ],
  },
  label: {
    sql: 'text',
    cast: 'text',
    values: ["''", "' '", "'a'", "'é'", "'😀'", "'a%b_c\\'", `'${'z'.repeat(300)}'`, 'null', "E'tab\\there'"],
  },
  code: { sql: 'varchar(5)', cast: 'varchar', values: ["'abcde'", "''", 'null', "'ab'"] },
  fixed: { sql: 'char(3)', cast: 'bpchar', values: ["'ab'", "'abc'", 'null'] },
  ci: { sql: 'ext.citext', cast: 'ext.citext', values: ["'Hello'", "'HELLO'", 'null', "'straße'"] },
  u: { sql: 'uuid', cast: 'uuid', values: ["'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'", 'null'] },
  flag: { sql: 'boolean', cast: 'bool', values: ['true', 'false', 'null'] },
  mood: { sql: 'scratch.mood', cast: 'scratch.mood', values: ["'happy'", "'sad'", "'meh'", 'null'] },
  day: {
    sql: 'date',
    cast: 'date',
    values: ["'4714-11-24 BC'", "'5874897-12-31'", "'infinity'", "'-infinity'", "'0001-01-01'", "'0001-12-31 BC'", "'2024-02-29'", 'null'],
  },
  at_local: {
    sql: 'timestamp',
    cast: 'timestamp',
    values: [
      "'4714-11-24 00:00:00 BC'",
      "'294276-12-31 23:59:59.999999'",
      "'infinity'",
      "'-infinity'",
      "'2024-02-29 23:59:59.999999'",
      "'0001-01-01 00:00:00'",
      'null',
    ],
  },
  at: {
    sql: 'timestamptz not null',
    cast: 'timestamptz',
    values: [
      "'infinity'",
      "'-infinity'",
      "'4714-11-24 00:00:00+00 BC'",
      "'294276-12-31 23:59:59.999999+00'",
      "'0044-03-15 12:00:00+00 BC'",
      "'10000-01-01 00:00:00+00'",
      "'0001-01-01 00:00:00+00'",
      "'9999-12-31 23:59:59.999999+00'",
      "'2024-06-01 12:00:00.5+00'",
      "'294247-06-01 00:00:00.123456+00'",
      "'1970-01-01 00:00:00+00'",
    ],
  },
  stamp: { sql: 'timestamptz', cast: 'timestamptz', values: ["'infinity'", 'null', "'0001-12-31 23:59:59.999999+00 BC'", "'2024-01-01Z'"] },
  clock: { sql: 'time', cast: 'time', values: ["'00:00:00'", "'24:00:00'", "'23:59:59.999999'", 'null'] },
  clock_tz: { sql: 'timetz', cast: 'timetz', values: ["'00:00:00+15:59'", "'24:00:00-15:59'", "'12:00:00.5+05:30'", 'null'] },
  span: {
    sql: 'interval',
    cast: 'interval',
    values: [
      "'P178956970Y7M2147483647DT2562047788H0M54.775807S'",
      "'P-178956970Y-8M-2147483648DT-2562047788H0M-54.775808S'",
      "'0'",
      "'-1 year 2 months 3 days -04:05:06.5'",
      'null',
    ],
  },
  doc: { sql: 'jsonb', cast: 'jsonb', values: [`'{"a": [1, 1e400]}'`, 'null'] },
  tags: { sql: 'text[]', cast: 'text[]', values: ["'{a,NULL}'", "'{}'", 'null'] },
  blob: { sql: 'bytea', cast: 'bytea', values: ["'\\x00ff'", 'null'] },
  words: { sql: 'tsvector', cast: 'tsvector', values: ["'a:1'", 'null'] },
};
const ROWS = 36;

// The kinds the service gives each column (lib/collections/kinds.ts), by its SQL type's name.
const KINDS: Record<string, string> = {
  int2: 'integer',
  int4: 'integer',
  int8: 'integer',
  numeric: 'decimal',
  float4: 'decimal',
  float8: 'decimal',
  text: 'text',
  varchar: 'text',
  bpchar: 'text',
  'ext.citext': 'text',
  uuid: 'uuid',
  bool: 'boolean',
  'scratch.mood': 'enum',
  date: 'date',
  timestamp: 'timestamp',
  timestamptz: 'timestamptz',
  time: 'time',
  timetz: 'time',
  interval: 'interval',
  jsonb: 'json',
  'text[]': 'array',
  bytea: 'bytea',
  tsvector: 'tsvector',
};
type Kind = Parameters<typeof operatorsFor>[0];
const kindOf = (name: string) => KINDS[COLUMNS[name]!.cast] as Kind;
const FILTERED = Object.keys(COLUMNS).filter((name) => operatorsFor(kindOf(name)).length > 0);
const SORTED = Object.keys(COLUMNS).filter((name) => sortable(kindOf(name)));
const ALL_OPERATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'prefix', 'isnull', 'like', ''];

const DDL = `
  create schema scratch;
  -- citext off the search path, as some teams keep their extensions: its operators are found only by name.
  create schema ext;
  create extension citext with schema ext;
  create type scratch.mood as enum ('happy', 'sad', 'meh');
  create table scratch.every (id bigint primary key, ${Object.entries(COLUMNS)
    .map(([name, column]) => `${name} ${column.sql}`)
    .join(', ')});
  create index every_at on scratch.every (at, id);
  insert into scratch.every values ${Array.from(
    { length: ROWS },
    (_, row) =>
      `(${row + 1}, ${Object.values(COLUMNS)
        .map((column) => `(${column.values[row % column.values.length]})::${column.cast}`)
        .join(', ')})`,
  ).join(',\n')};
  analyze scratch.every;
`;

const FILE = `
collections:
  - relation: scratch.every
    columns: [id, ${Object.keys(COLUMNS).join(', ')}]
    filters:
${FILTERED.map((name) => `      ${name}: [${operatorsFor(kindOf(name)).join(', ')}]`).join('\n')}
    sort: [${SORTED.join(', ')}]
    unindexedSorts: true
    variants: [offset, page, cursor, time]
    timeColumn: at
  - relation: scratch.every
    name: every_time
    columns: [id, at, r, label, day]
    filters: { r: [lt, gte], label: [eq, prefix], day: [gt] }
    variants: [time]
    timeColumn: at
`;

/** Values a request may send: adversarial text, each type's edges, and the forms the rows print. */
const ADVERSARIAL = [
  '1e400',
  '-1e400',
  '1e-400',
  '-1e-400',
  '1e-40',
  '1e-46',
  '3.4028236e38',
  '1.8e308',
  '2e-324',
  '5e-324',
  '4.9e-324',
  '0e-9999',
  '1e9999',
  '1e-9999',
  'NaN',
  'nan',
  'Infinity',
  '-Infinity',
  'inf',
  'infinity',
  '-infinity',
  '-0',
  '+0',
  '0',
  '.5',
  '5.',
  '1e',
  '1.2.3',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  'x\ud83d',
  '😀',
  'é',
  'straße',
  'STRASSE',
  '%',
  '_',
  '\\',
  '',
  ' ',
  ',',
  'a,b',
  '"',
  "'",
  '{}',
  '{a}',
  'null',
  'NULL',
  'true',
  'false',
  'TRUE',
  'yes',
  '12345678901234567890',
  '-12345678901234567890',
  '99999999999999999999',
  '9223372036854775807',
  '9223372036854775808',
  '-9223372036854775808',
  '-9223372036854775809',
  '2147483648',
  '-2147483649',
  '32768',
  '-32769',
  '007',
  '1_000',
  '0x10',
  '2024-02-30',
  '2024-02-29',
  '2023-02-29',
  '0000-01-01',
  '0001-01-01',
  '9999-12-31',
  '10000-01-01',
  '294277-01-01',
  '4714-11-24 BC',
  '0044-03-15 BC',
  'epoch',
  'now',
  'today',
  'allballs',
  'yesterday',
  '2024-01-01T00:00:00Z',
  '2024-01-01T00:00:00',
  '2024-01-01 00:00:00',
  '2024-01-01T24:00:00',
  '0001-01-01T00:00:00+15:59',
  '9999-12-31T23:59:59.999999-15:59',
  '2024-01-01T00:00:00+16:00',
  '2024-01-01T00:00:00.1234567Z',
  '24:00:00',
  '24:00:00.5',
  '24:00:00.000001',
  '24:00:00.000000',
  '23:59:60',
  '23:59:59.999999',
  '12:00+15:59',
  '12:00-1559',
  '12:00+16',
  '24:00Z',
  '24:00:00.5Z',
  'P9999999Y9999999M9999999W9999999DT9999999H9999999M9999999.999999S',
  'P-9999999Y',
  'PT-0.5S',
  'P1Y2M3DT4H5M6.5S',
  'P10000000Y',
  'P',
  'PT',
  'P1.5Y',
  '1 day',
  '00000000-0000-0000-0000-000000000000',
  'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
  '00000000000000000000000000000000',
  '{00000000-0000-0000-0000-000000000000}',
  'happy',
  'HAPPY',
  'angry',
  'z'.repeat(1000),
  'z'.repeat(1001),
  `1${'0'.repeat(999)}`,
  `0.${'0'.repeat(997)}1`,
];

/** The printed forms of the rows' values, as a client would send them back. */
const PRINTED_FORMS = [
  '4714-11-24 BC',
  '5874897-12-31',
  '0001-12-31 BC',
  '294276-12-31T23:59:59.999999',
  '4714-11-24T00:00:00.000000 BC',
  '294276-12-31T23:59:59.999999Z',
  '10000-01-01T00:00:00.000000Z',
  '0044-03-15T12:00:00.000000Z BC',
  '3.4028235e+38',
  '1e-45',
  '1.7976931348623157e+308',
  '5e-324',
  'P178956970Y7M2147483647DT2562047788H0M54.775807S',
  'P-178956970Y-8M-2147483648DT-2562047788H0M-54.775808S',
  '10:00:00.5+05:30',
  '00:00:00+15:59',
];

const value = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...ADVERSARIAL) },
  { weight: 2, arbitrary: fc.constantFrom(...PRINTED_FORMS) },
  { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
  { weight: 1, arbitrary: fc.double().map(String) },
  { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String) },
  { weight: 1, arbitrary: fc.date({ noInvalidDate: true }).map((date) => date.toISOString()) },
);

const two = (n: number) => String(n).padStart(2, '0');
const day = fc
  .record({ year: fc.integer({ min: 1, max: 9999 }), month: fc.integer({ min: 1, max: 12 }), day: fc.integer({ min: 1, max: 28 }) })
  .map((d) => `${String(d.year).padStart(4, '0')}-${two(d.month)}-${two(d.day)}`);
const clock = fc
  .tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 59 }), fc.nat({ max: 999999 }))
  .map(([h, m, s, us]) => `${two(h)}:${two(m)}:${two(s)}.${String(us).padStart(6, '0')}`);

/** Values of a kind the service takes, so that many requests are answered and walked. */
function validValue(column: string): fc.Arbitrary<string> {
  const cast = COLUMNS[column]!.cast;
  switch (kindOf(column)) {
    case 'integer': {
      const bits = { int2: 15n, int4: 31n, int8: 63n }[cast as 'int2']!;
      return fc.bigInt({ min: -(2n ** bits), max: 2n ** bits - 1n }).map(String);
    }
    case 'decimal':
      return fc.oneof(fc.double().map(String), fc.integer().map(String), fc.constantFrom('0.01', '-0', '1e-45', '1e38', '5e-324', '1e308'));
    case 'text':
      return fc.oneof(fc.string({ maxLength: 3 }), fc.constantFrom('a', 'A', 'Hello', 'hello', 'ab', 'é', 'z'));
    case 'uuid':
      return fc.uuid();
    case 'boolean':
      return fc.constantFrom('true', 'false');
    case 'enum':
      return fc.constantFrom('happy', 'sad', 'meh');
    case 'date':
      return day;
    case 'timestamp':
      return fc.tuple(day, clock).map(([d, c]) => `${d}T${c}`);
    case 'timestamptz':
      return fc.tuple(day, clock, fc.constantFrom('Z', '+15:59', '-15:59', '+05:30')).map(([d, c, z]) => `${d}T${c}${z}`);
    case 'time':
      return cast === 'timetz' ? fc.tuple(clock, fc.constantFrom('Z', '+15:59', '-11')).map(([c, z]) => c + z) : clock;
    default:
      return fc.tuple(fc.integer({ min: -9999999, max: 9999999 }), fc.constantFrom('Y', 'M', 'W', 'D')).map(([n, unit]) => `P${n}${unit}`);
  }
}

interface Filter {
  readonly column: string;
  readonly op: string;
  readonly values: readonly string[];
}

const filter: fc.Arbitrary<Filter> = fc.constantFrom(...FILTERED).chain((column) =>
  fc
    .record({
      op: fc.oneof({ weight: 6, arbitrary: fc.constant('offered') }, { weight: 1, arbitrary: fc.constantFrom(...ALL_OPERATORS) }),
      values: fc.array(fc.oneof({ weight: 3, arbitrary: validValue(column) }, { weight: 2, arbitrary: value }), {
        minLength: 1,
        maxLength: 2,
      }),
      pick: fc.nat(),
    })
    .map(({ op, values, pick }) => {
      const offered = operatorsFor(kindOf(column));
      return { column, op: op === 'offered' ? offered[pick % offered.length]! : op, values };
    }),
);

const size = fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 5, max: 40 }).map(String) }, { weight: 1, arbitrary: value });
const sort = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  {
    weight: 4,
    arbitrary: fc
      .uniqueArray(fc.tuple(fc.constantFrom(...SORTED), fc.boolean()), { minLength: 1, maxLength: 3, selector: ([name]) => name })
      .map((keys) => keys.map(([name, descending]) => (descending ? `-${name}` : name)).join(',')),
  },
  { weight: 1, arbitrary: fc.constantFrom('doc', 'blob', 'nope', '-', 'r,r', '') },
);

type Variant = 'offset' | 'page' | 'cursor' | 'since' | 'before' | 'after' | 'time';

const request = fc.record({
  variant: fc.constantFrom<Variant>('offset', 'page', 'cursor', 'since', 'before', 'after', 'time'),
  filters: fc.array(filter, { maxLength: 2 }),
  sort,
  size,
  start: fc.oneof(
    { weight: 3, arbitrary: fc.nat({ max: 40 }).map(String) },
    { weight: 2, arbitrary: validValue('at') },
    { weight: 2, arbitrary: value },
  ),
});
type Request = typeof request extends fc.Arbitrary<infer R> ? R : never;

/** The columns every_time filters on: a time request's other filters would only be refused. */
const TIME_FILTERS = new Set(['r', 'label', 'day']);

function encode(text: string): string {
  // A lone surrogate cannot be percent-encoded as UTF-8: sent as the escapes of one, which the service must refuse.
  try {
    return encodeURIComponent(text);
  } catch {
    return [...text].map((ch) => (/[\ud800-\udfff]/.test(ch) ? '%ED%A0%80' : encodeURIComponent(ch))).join('');
  }
}

function filterName(f: Filter): string {
  return f.op === 'eq' ? f.column : `${f.column}[${f.op}]`;
}

/** The query of a request, as [name, value] pairs (a name sent twice stays twice: a 400 too). */
function paramsOf(r: Request): [string, string][] {
  const filters = r.variant === 'time' ? r.filters.filter((f) => TIME_FILTERS.has(f.column)) : r.filters;
  const params: [string, string][] = filters.map((f) => [filterName(f), f.values.join(',')]);
  const sizeName = r.variant === 'offset' ? 'limit' : 'page-size';
  params.push([sizeName, r.size]);
  if (r.variant === 'offset') params.push(['offset', r.start]);
  if (r.variant === 'page') params.push(['page', r.start]);
  if (r.variant === 'since') params.push(['since_id', r.start]);
  if (r.variant === 'before' || r.variant === 'after') params.push([r.variant, r.start]);
  if (r.sort !== undefined && ['offset', 'page', 'cursor'].includes(r.variant)) params.push(['sort', r.sort]);
  return params;
}

function pathOf(r: Request): string {
  const collection = r.variant === 'time' ? 'every_time' : 'every';
  const query = paramsOf(r)
    .map(([name, text]) => `${encode(name)}=${encode(text)}`)
    .join('&');
  return `/v1/${collection}?${query}`;
}

/** The ids SQL returns for a request the service answered, in the order its walk must return them. */
async function expectedIds(sql: Sql, r: Request): Promise<string[]> {
  const where: string[] = [];
  const args: unknown[] = [];
  // Each value goes as text and is cast in SQL: postgres.js would serialize it by the parameter's type (a bool's 'true' as false).
  const arg = (v: unknown) => {
    args.push(v);
    return `$${args.length}`;
  };
  for (const f of r.variant === 'time' ? r.filters.filter((f) => TIME_FILTERS.has(f.column)) : r.filters) {
    const { cast } = COLUMNS[f.column]!;
    const column = `"${f.column}"`;
    // citext's own operators, named (the search path does not reach them): what ORDER BY compares with.
    const named = (op: string) => (cast === 'ext.citext' ? `operator(ext.${op})` : op);
    const first = f.values.join(',');
    switch (f.op) {
      case 'isnull':
        where.push(`${column} is ${first === 'true' ? '' : 'not '}null`);
        break;
      case 'in':
        where.push(`${column} ${named('=')} any(${arg(first.split(','))}::text[]::${cast}[])`);
        break;
      case 'prefix':
        where.push(`${column} ${named('~~')} ${arg(`${first.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`)}`);
        break;
      default: {
        const sqlOp = { eq: '=', ne: '<>', lt: '<', lte: '<=', gt: '>', gte: '>=' }[f.op]!;
        where.push(`${column} ${named(sqlOp)} ${arg(first)}::text::${cast}`);
      }
    }
  }
  let order: string;
  const keys = (r.sort ?? '').split(',').filter((key) => key !== '');
  const direction = (key: string) => (key.startsWith('-') ? ' desc' : '');
  if (r.variant === 'time' || r.variant === 'before') order = 'at desc, id desc';
  else if (r.variant === 'after') order = 'at, id';
  else if (r.variant === 'since') order = 'id';
  else order = [...keys.map((key) => `"${key.replace(/^-/, '')}"${direction(key)}`), `id${direction(keys.at(-1) ?? '')}`].join(', ');
  if (r.variant === 'before') where.push(`at < ${arg(r.start)}::text::timestamptz`);
  if (r.variant === 'after') where.push(`at > ${arg(r.start)}::text::timestamptz`);
  if (r.variant === 'since') where.push(`id > ${arg(r.start)}::text::int8`);
  const text = `select id::text as key from scratch.every where ${where.length ? where.join(' and ') : 'true'} order by ${order}`;
  const rows = await sql.unsafe(text, args as never[]);
  const ids = rows.map((row) => row.key as string);
  if (r.variant === 'offset' || r.variant === 'page') {
    const skip = r.variant === 'offset' ? Number(r.start) : Number(r.start) * Number(r.size);
    return ids.slice(skip);
  }
  return ids;
}

t.test('no value is a 500: random filters, sorts and positions over every type, served and walked', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(DDL).simple();
  const registry = await loadRegistry(database.sql, FILE, 'collections.yaml', { schemas: ['scratch'], serviceSchema: 'service' });
  const config = parseConfig({ ADMIN_TOKEN });
  const secret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  // What a 500 logs goes into the failure's message.
  let logged: unknown;
  const app = buildApp({ database, config, registry, cursorSecret: secret, rateLimit: false, log: (error) => (logged = error) });
  const get = async (path: string) => {
    const res = await app.request(`http://test.local${path}`);
    const text = await res.text();
    return { status: res.status, text, body: JSON.parse(text) };
  };

  let answered = 0;
  let refused = 0;
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const path = pathOf(r);
      const first = await get(path);
      if (first.status === 400) {
        refused++;
        const sent = new Set(paramsOf(r).map(([name]) => name));
        const names: string[] = (first.body.invalid_params ?? []).map((p: { name: string }) => p.name);
        if (names.length === 0 || !names.every((name) => sent.has(name))) {
          throw new Error(`${path}: a 400 that names ${JSON.stringify(names)}, not a parameter sent: ${first.text}`);
        }
        return;
      }
      if (first.status !== 200) throw new Error(`${path}: a ${first.status}: ${first.text} ${String(logged)}`);
      answered++;
      const items: string[] = [];
      let chunk = first;
      for (let n = 0; ; n++) {
        const list = chunk.body[r.variant === 'time' ? 'every_time' : 'every'] as { id: number }[];
        items.push(...list.map((item) => String(item.id)));
        const next: string | undefined = chunk.body._links.next?.href;
        if (next === undefined || n > ROWS + 1) break;
        const url = new URL(next);
        chunk = await get(url.pathname + url.search);
        if (chunk.status !== 200) {
          throw new Error(`${path}: chunk ${n + 1} of its walk (${next}) is a ${chunk.status}: ${chunk.text} ${String(logged)}`);
        }
      }
      const expected = await expectedIds(database.sql, r);
      if (JSON.stringify(items) !== JSON.stringify(expected)) {
        throw new Error(`${path}: walked ${JSON.stringify(items)}, SQL returns ${JSON.stringify(expected)}`);
      }
    }),
    { numRuns: 400 },
  );
  t.ok(answered > 40, `answered and walked ${answered} requests`);
  t.ok(refused > 40, `refused ${refused} requests with a 400 naming a parameter`);
});
