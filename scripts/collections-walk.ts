// `npm run collections -- walk`: each collection of a resolved file walked to the end through a running service, in
// every variant it offers, its items' keys compared with a SELECT of the relation (docs/reference/collections-file.md, "Tools").
import type { Sql } from 'postgres';
import { createClient, type FetchFunction } from '../client/index.ts';
import { qualifiedName } from '../lib/catalog/model.ts';
import type { Collection } from '../lib/collections/model.ts';
import { claimAt } from '../lib/pagination/access.ts';

export interface WalkOptions {
  /** The service's origin, e.g. http://localhost:3000. */
  readonly url: string;
  /** An API key, so that the walk is counted on its tier rather than the anonymous one. */
  readonly apiKey?: string;
  /**
   * The key's claims, as the operator API shows them (GET /admin/keys/{id}): what a collection's row rules compare
   * their columns with, so that its walks are compared with the key's rows. Without them, such a collection is not walked.
   */
  readonly claims?: Readonly<Record<string, unknown>>;
  /** Collections not walked, by name, and why (the service does not list them for this client). */
  readonly skip?: ReadonlyMap<string, string>;
  /** Prints one line of the report. */
  readonly write: (line: string) => void;
}

/** What the walks found: whether every walk matched its SELECT, and how many collections could not be walked. */
export interface WalkOutcome {
  readonly ok: boolean;
  readonly notWalked: number;
}

/** A condition on the relation's rows, with its parameters ($1, … in its text). */
interface Rows {
  readonly where: string;
  readonly parameters: readonly (readonly string[])[];
}

const EVERY_ROW: Rows = { where: 'true', parameters: [] };

/** How a walk of one variant begins, and which rows it reaches. */
interface Start {
  readonly variant: string;
  readonly query: Record<string, string>;
  /** The rows it reaches, as a condition on the relation's rows (all of them when absent). */
  readonly where?: string;
}

/** A number of a chunk as its text: a bigint or numeric key past 2^53 would lose digits as a JS number. */
class NumberText {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

type Reviver = (key: string, value: unknown, context: { source?: string }) => unknown;
const parseExact = (text: string): unknown =>
  (JSON.parse as (text: string, reviver: Reviver) => unknown)(text, (_key, value, context) =>
    typeof value === 'number' ? new NumberText(context.source!) : value,
  );

/** Most keys a line names of each kind: the rest are counted. */
const SHOWN = 5;
/** The earliest instant `after` takes (docs/reference/api.md, "Timestamps"): a walk from the oldest starts there. */
const EARLIEST = '0001-01-01T00:00:00';

/**
 * Walks every collection in every variant it offers and prints a line for each walk: the items, the requests, and
 * `ok` or the rows missing, repeated or not in the relation, counted against the relation's rows (those the key's
 * claims choose, under row rules). A collection not walked, or whose key two rows share, gets a line saying so.
 */
export async function walkCollections(sql: Sql, collections: readonly Collection[], options: WalkOptions): Promise<WalkOutcome> {
  let ok = true;
  let notWalked = 0;
  for (const collection of collections) {
    const reason = options.skip?.get(collection.name) ?? unreadRows(collection, options.claims);
    const rows = typeof reason === 'string' ? undefined : reason;
    if (rows === undefined) {
      options.write(`${collection.name}: not walked: ${reason as string}`);
      notWalked++;
      continue;
    }
    let expected: Map<string, Counted>;
    try {
      expected = await relationKeys(sql, collection, rows);
    } catch (error) {
      options.write(`${collection.name}: cannot SELECT its keys: ${(error as Error).message}`);
      ok = false;
      continue;
    }
    // A key two rows share: a cursor walk passes over the second at a chunk boundary, which no walk can tell from a lost row.
    const shared = [...expected.values()].filter((counted) => counted.rows > 1);
    if (shared.length > 0) {
      const rowsShared = shared.reduce((sum, counted) => sum + counted.rows, 0);
      options.write(
        `${collection.name}: key ${collection.key.columns.join(', ')} is not unique: ${rowsShared} rows of ${qualifiedName(collection.relation)} ` +
          `share ${shared.length} of its values, so its walks cannot reach each row once (check tests a key where it can count the rows)`,
      );
      ok = false;
    }
    for (const start of startsOf(collection)) {
      const line = await walkOne(sql, collection, start, expected, rows, options);
      options.write(`${collection.name} ${start.variant}: ${line.text}`);
      ok &&= line.ok;
    }
  }
  return { ok, notWalked };
}

/**
 * The rows the client reads under the collection's row rules, as a condition with the claims' values as parameters
 * (compared as the service compares them: the column equal to one of the values, read as its type); every row without
 * rules; or why the walk cannot know them.
 */
function unreadRows(collection: Collection, claims: Readonly<Record<string, unknown>> | undefined): Rows | string {
  const rules = collection.access.rows;
  if (rules.length === 0) return EVERY_ROW;
  if (claims === undefined) {
    return (
      'it has row rules (access.rows), and a key reads only the rows its claims choose, which walk compares only ' +
      "knowing them: walk with --key and --key-id, ADMIN_TOKEN set, so that walk reads the key's claims (GET /admin/keys/{id})"
    );
  }
  const conditions: string[] = [];
  const parameters: string[][] = [];
  for (const rule of rules) {
    const path = rule.claim.join('.');
    const claim = claimAt(claims, rule.claim);
    const scalar = (value: unknown) => typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
    const values = scalar(claim) ? [claim] : Array.isArray(claim) && claim.length > 0 && claim.every(scalar) ? claim : undefined;
    if (values === undefined) return `the key's claims have no ${path} (a string, a number, or a list of them), which its row rule needs`;
    parameters.push(values.map(String));
    const { type } = rule.column;
    conditions.push(`${quote(rule.column.name)} = any($${parameters.length}::text[]::${quote(type.schema)}.${quote(type.name)}[])`);
  }
  return { where: conditions.join(' and '), parameters };
}

/** The first request of each variant the collection offers: the largest page, the default order, no filter. */
function startsOf(collection: Collection): Start[] {
  const max = String(collection.pageSize.max);
  const starts: Start[] = [];
  for (const variant of collection.variants) {
    if (variant === 'offset') starts.push({ variant, query: { limit: max, offset: '0' } });
    if (variant === 'page') starts.push({ variant, query: { page: '0', 'page-size': max } });
    if (variant === 'cursor' && collection.defaultVariant !== 'time') starts.push({ variant, query: { 'page-size': max } });
    if (variant === 'cursor' && collection.defaultVariant === 'time') {
      // page-size alone starts the time variant where it is the default: since_id starts a cursor walk then
      // (docs/reference/api.md, "Choosing the variant"), from 0, over the key of one integer column the file check requires.
      const key = quote(collection.key.columns[0]!);
      starts.push({ variant: 'cursor (since_id=0)', query: { since_id: '0', 'page-size': max }, where: `${key} > 0` });
    }
    if (variant === 'time') {
      const time = collection.fields.find((field) => field.column.name === collection.timeColumn)!;
      const after = time.kind === 'timestamptz' ? `${EARLIEST}Z` : EARLIEST;
      // A row at that instant or before it (BC) lies before where the walk starts: compared with the rows after it.
      starts.push({
        variant: `time (after=${after})`,
        query: { after, 'page-size': max },
        where: `${quote(time.column.name)} > '${after}'`,
      });
    }
  }
  return starts;
}

interface Line {
  readonly ok: boolean;
  readonly text: string;
}

async function walkOne(
  sql: Sql,
  collection: Collection,
  start: Start,
  expected: ReadonlyMap<string, Counted>,
  rows: Rows,
  options: WalkOptions,
): Promise<Line> {
  let requests = 0;
  let limited = 0;
  const counting: FetchFunction = async (input, init) => {
    const response = await fetch(input, init);
    requests++;
    if (response.status === 429) limited++;
    if (response.ok) Object.defineProperty(response, 'json', { value: async () => parseExact(await response.text()) });
    return response;
  };
  // Waits as long as the service says: a walk on the anonymous allowance waits out many a window.
  const client = createClient({
    baseUrl: options.url,
    ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
    maxWaitSeconds: 3600,
    maxRetries: 100,
    fetch: counting,
  });
  const fields = collection.key.columns.map((column) => collection.fields.find((field) => field.column.name === column)!.name);
  const walked: (string | null)[][] = [];
  let failure: string | undefined;
  try {
    // The client's types are the demo's; the walk reads only the items' key fields.
    const listing = client.list(collection.name as 'products', start.query as never);
    for await (const chunk of listing.chunks()) {
      const items = (chunk as unknown as Record<string, Record<string, unknown>[]>)[collection.name] ?? [];
      for (const item of items) walked.push(fields.map((field) => valueText(item[field])));
    }
  } catch (error) {
    failure = (error as Error).message;
  }
  const waited = limited === 0 ? '' : ` (${limited} answered 429 and waited out)`;
  const done = `${walked.length} items in ${requests} request${requests === 1 ? '' : 's'}${waited}`;
  if (failure !== undefined) return { ok: false, text: `${done}, then ${failure}` };

  let found: string[][];
  try {
    found = await normalisedKeys(sql, collection, walked);
  } catch (error) {
    return { ok: false, text: `${done}; their keys do not read back as the columns' types: ${(error as Error).message}` };
  }
  const reached =
    start.where === undefined ? expected : await relationKeys(sql, collection, { ...rows, where: `(${rows.where}) and ${start.where}` });
  // Compared as multisets: each key as many times as rows hold it (count(*) of the relation, not its distinct keys).
  const seen = new Map<string, number>();
  for (const key of found) seen.set(JSON.stringify(key), (seen.get(JSON.stringify(key)) ?? 0) + 1);
  const missing: [string, number, number][] = [];
  const repeated: [string, number, number][] = [];
  let missingRows = 0;
  let repeatedRows = 0;
  let total = 0;
  for (const [text, counted] of reached) {
    const times = seen.get(text) ?? 0;
    total += counted.rows;
    if (times < counted.rows) {
      missing.push([text, times, counted.rows]);
      missingRows += counted.rows - times;
    } else if (times > counted.rows) {
      repeated.push([text, times, counted.rows]);
      repeatedRows += times - counted.rows;
    }
  }
  const extra = [...seen.keys()].filter((text) => !reached.has(text)).map((text) => JSON.parse(text));
  if (missing.length + repeated.length + extra.length === 0) return { ok: true, text: `${done}: ok` };
  const parts = [
    countedText(missing, missingRows, 'missing', (times, rows) => `${times} of ${rows} rows walked`),
    countedText(repeated, repeatedRows, 'more than once', (times, rows) => `${times} times, ${rows} row${rows === 1 ? '' : 's'}`),
    keysText(extra, `not in ${qualifiedName(collection.relation)}`),
  ].filter((part) => part !== undefined);
  return { ok: false, text: `${done}, of ${total} rows: ${parts.join('; ')}` };
}

/** A key field's value as the text PostgreSQL reads it back from: numbers as printed, strings as they are. */
function valueText(value: unknown): string | null {
  if (value instanceof NumberText) return value.text;
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return String(value);
  return null;
}

/**
 * The walked keys as the relation's own `column::text` would print them: each value read back through its column's
 * type in the same session (so a timestamp, a numeric or an interval compares as PostgreSQL prints it, whatever the
 * service's JSON made of it), in the order walked.
 */
async function normalisedKeys(sql: Sql, collection: Collection, walked: readonly (string | null)[][]): Promise<string[][]> {
  if (walked.length === 0) return [];
  const columns = collection.key.columns;
  const read = columns.map((column, at) => {
    const { type } = collection.fields.find((field) => field.column.name === column)!.column;
    return `(u.k${at}::${quote(type.schema)}.${quote(type.name)})::text`;
  });
  const parameters = columns.map((_, at) => `$${at + 1}::text[]`);
  const names = columns.map((_, at) => `k${at}`);
  const rows = await sql.unsafe(
    `select array[${read.join(', ')}] as key from unnest(${parameters.join(', ')}) with ordinality as u(${names.join(', ')}, n) order by u.n`,
    columns.map((_, at) => walked.map((key) => key[at]!)) as never[],
  );
  return rows.map((row) => row.key as string[]);
}

/** How many rows of the relation hold a key. */
interface Counted {
  readonly key: string[];
  readonly rows: number;
}

/** Every key of the relation's rows that `rows` chooses, as `column::text`, by its JSON text, with the rows holding it. */
async function relationKeys(sql: Sql, collection: Collection, rows: Rows): Promise<Map<string, Counted>> {
  const columns = collection.key.columns.map((column) => `${quote(column)}::text`);
  const { schema, name } = collection.relation;
  const found = await sql.unsafe(
    `select array[${columns.join(', ')}] as key, count(*)::int as rows from ${quote(schema)}.${quote(name)} where ${rows.where} group by 1 order by 1`,
    rows.parameters as never[],
  );
  return new Map(found.map((row) => [JSON.stringify(row.key), { key: row.key as string[], rows: row.rows as number }]));
}

/** Keys and their counts as a line's part: `N what: k1, k2 (…), …`, N counting rows; the note where a key has several rows. */
function countedText(
  keys: readonly [string, number, number][],
  rows: number,
  what: string,
  note: (times: number, rows: number) => string,
): string | undefined {
  if (keys.length === 0) return undefined;
  const shown = keys.slice(0, SHOWN).map(([text, times, held]) => {
    const key = keyText(JSON.parse(text) as (string | null)[]);
    return held === 1 && (times === 0 || times === 2) ? key : `${key} (${note(times, held)})`;
  });
  const more = keys.length > SHOWN ? `, … ${keys.length - SHOWN} more` : '';
  return `${rows} ${what}: ${shown.join(', ')}${more}`;
}

function keyText(key: readonly (string | null)[]): string {
  return key.length === 1 ? String(key[0]) : `(${key.join(', ')})`;
}

function keysText(keys: readonly (string | null)[][], what: string): string | undefined {
  if (keys.length === 0) return undefined;
  const shown = keys.slice(0, SHOWN).map(keyText);
  const more = keys.length > SHOWN ? `, … ${keys.length - SHOWN} more` : '';
  return `${keys.length} ${what}: ${shown.join(', ')}${more}`;
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
