// The demo's data, in its tables of schema demo (demo/schema.ts). Deterministic: the same seed gives the same rows.
// Loaded with COPY, in batches, into a copy swapped in at the end.

import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setImmediate } from 'node:timers/promises';
import type { Sql } from 'postgres';
import { formatEpoch } from '../db/timestamps.ts';
import { DEMO_SCHEMA } from './schema.ts';
import { replaceTable } from './table-swap.ts';

export interface SeedSizes {
  products?: number;
  orders?: number;
  events?: number;
}

export const defaultSizes = { products: 50_000, orders: 30_000, events: 30_000 } as const;

/** mulberry32: a small, fast, seedable PRNG; enough for demo data. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const EPOCH_SECONDS = Date.UTC(2025, 0, 1) / 1000;

/**
 * Microseconds after 2025-01-01 as RFC 3339 text; integer arithmetic, so no precision is lost. Printed as
 * the service's items print theirs (db/timestamps.ts), not through a Date per row: the
 * generator's time is what paces a seed's COPY (docs/benchmarks.md).
 */
function timestamp(micros: number): string {
  const seconds = Math.floor(micros / 1e6);
  const fraction = String(micros - seconds * 1e6).padStart(6, '0');
  return formatEpoch(`${EPOCH_SECONDS + seconds}.${fraction}`)!;
}

const categories = ['books', 'garden', 'kitchen', 'music', 'outdoor', 'tools', 'toys', 'games'];
const adjectives = ['Amber', 'Brisk', 'Cosy', 'Deft', 'Eager', 'Fine', 'Grand', 'Handy', 'Ideal', 'Jolly', 'Keen', 'Lucid'];
const nouns = ['Anvil', 'Basket', 'Candle', 'Drum', 'Easel', 'Flask', 'Globe', 'Hammer', 'Ink', 'Jar', 'Kettle', 'Lamp'];
const statuses = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'];
const eventTypes = ['login', 'logout', 'purchase', 'refund', 'signup', 'error'];
const sources = ['web', 'ios', 'android', 'api'];

type Row = (string | number)[];

/** products: names in many groups (prefix filters), prices and creation times spread out. */
function* productRows(count: number, seed: number): Generator<Row> {
  const next = random(seed);
  const pick = <T>(list: T[]) => list[Math.floor(next() * list.length)]!;
  for (let i = 0; i < count; i++) {
    const name = `${pick(adjectives)} ${pick(nouns)} ${Math.floor(next() * 10_000)}`;
    yield [name, pick(categories), 100 + Math.floor(next() * 99_900), timestamp(Math.floor(next() * 365 * 86_400e6))];
  }
}

function* orderRows(count: number, seed: number): Generator<Row> {
  const next = random(seed);
  const pick = <T>(list: T[]) => list[Math.floor(next() * list.length)]!;
  let micros = 0;
  for (let i = 0; i < count; i++) {
    micros += 1 + Math.floor(next() * 600e6);
    yield [1 + Math.floor(next() * 5_000), pick(statuses), 500 + Math.floor(next() * 200_000), timestamp(micros)];
  }
}

/** events: mostly increasing times, with bursts of many items sharing one exact timestamp. */
function* eventRows(count: number, seed: number): Generator<Row> {
  const next = random(seed);
  const pick = <T>(list: T[]) => list[Math.floor(next() * list.length)]!;
  let micros = 0;
  let burst = 0;
  for (let i = 0; i < count; i++) {
    if (burst > 0) burst--;
    else {
      micros += 1 + Math.floor(next() * 30e6);
      // About one step in fifty opens a burst of up to 250 events at the same microsecond.
      if (next() < 0.02) burst = Math.floor(next() * 250);
    }
    const type = pick(eventTypes);
    yield [type, pick(sources), timestamp(micros), `${type} #${i + 1}`];
  }
}

const tables = {
  products: { columns: ['name', 'category', 'price_cents', 'created_at'], rows: productRows, seed: 1 },
  orders: { columns: ['customer_id', 'status', 'total_cents', 'created_at'], rows: orderRows, seed: 2 },
  events: { columns: ['type', 'source', 'occurred_at', 'message'], rows: eventRows, seed: 3 },
} as const;

export type SeedTable = keyof typeof tables;

/** The demo tables the generator knows, in seeding order. */
export const seedTables = Object.keys(tables) as SeedTable[];

// COPY text format: escape backslash, tab, newline and carriage return. Generated values rarely contain
// any, so the test comes first and the replace runs only when needed.
const SPECIAL = /[\\\t\n\r]/;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
function copyValue(value: string | number): string {
  // A number's text has none of them.
  if (typeof value === 'number') return String(value);
  return SPECIAL.test(value) ? value.replace(/[\\\t\n\r]/g, (ch) => ESCAPES[ch]!) : value;
}

function copyLine(row: Row): string {
  let line = copyValue(row[0]!);
  for (let i = 1; i < row.length; i++) line += `\t${copyValue(row[i]!)}`;
  return `${line}\n`;
}

/**
 * The table's rows as COPY text, in chunks of `batch` rows; reports the rows produced so far. It yields
 * to the event loop after each chunk: the socket takes a chunk at once while the server keeps up, and
 * its completions come back as next-tick callbacks, so without a pause the whole load ran in one turn of
 * the event loop, stalling everything else in the process (a reader here waited for the whole load). A
 * chunk is kept small enough for the socket's send buffer: what the buffer does not take goes out only when
 * the event loop is free again, so while the next chunk was being made, PostgreSQL waited for the rest of
 * the last one (docs/benchmarks.md).
 */
async function* copyChunks(rows: Generator<Row>, batch: number, onProgress: (done: number) => void): AsyncGenerator<string> {
  let done = 0;
  let chunk = '';
  for (const row of rows) {
    chunk += copyLine(row);
    if (++done % batch === 0) {
      yield chunk;
      chunk = '';
      onProgress(done);
      await setImmediate();
    }
  }
  if (chunk) yield chunk;
  onProgress(done);
}

/** Rows in a chunk of COPY text: 1,000 products are about 57 KB. */
const COPY_BATCH_ROWS = 1_000;

/**
 * Replaces the rows of one demo table with `count` generated rows; ids restart at 1.
 * The rows go into a copy of the table that is swapped in at the end (db/table-swap.ts): readers of the
 * live table wait only for the swap, milliseconds, never for the load; a failure leaves the old rows.
 * COPY FREEZE (allowed because the copy was created in this transaction) spares the first reads the
 * hint-bit writes.
 */
export async function seedTable(sql: Sql, table: SeedTable, count: number, onProgress: (done: number) => void = () => {}): Promise<void> {
  const { columns, rows, seed } = tables[table];
  await replaceTable(sql, `${DEMO_SCHEMA}.${table}`, async (connection, copy) => {
    // Two chunks ahead at most, rather than sixteen: less to hold in memory.
    const source = Readable.from(copyChunks(rows(count, seed), COPY_BATCH_ROWS, onProgress), { highWaterMark: 2 });
    const stream = await connection.unsafe(`copy ${copy} (${columns.join(', ')}) from stdin with (freeze)`).writable();
    await pipeline(source, stream);
  });
}

const SEED_LOCK = 7_204_119_002;

/** On start-up: fills the demo tables that are empty, once, even with several instances starting together. */
export async function seedIfEmpty(url: string, sizes: Required<SeedSizes>, connect: (url: string) => Sql): Promise<SeedTable[]> {
  const sql = connect(url);
  const seeded: SeedTable[] = [];
  try {
    await sql`select pg_advisory_lock(${SEED_LOCK})`;
    for (const table of Object.keys(tables) as SeedTable[]) {
      const [row] = await sql`select exists (select 1 from ${sql(DEMO_SCHEMA)}.${sql(table)}) as filled`;
      if (!row?.filled && sizes[table] > 0) {
        await seedTable(sql, table, sizes[table]);
        seeded.push(table);
      }
    }
    await sql`select pg_advisory_unlock(${SEED_LOCK})`;
  } finally {
    await sql.end();
  }
  return seeded;
}
