// The size of a filtered collection: exact (count(*)), estimated (the planner's estimate), or none.
import { sql } from 'drizzle-orm';
import type { Sql } from 'postgres';
import type { Database, StatementBudget } from '../../db/client.ts';
import { invalidParameter } from '../http/errors.ts';
import { type Filter, filterCondition, filtersKey, filterValues } from './filters.ts';
import type { QueryParams } from './params.ts';
import type { Collection } from './registry.ts';
import { collectionKey, literalLimit, shapeOf } from './shapes.ts';
import { runShape } from './shared-reads.ts';

/** The values of `count` a request may send; without one, a chunk is counted in the `auto` mode. */
export const COUNT_MODES = ['exact', 'estimated', 'none'] as const;
/**
 * `auto`, the default: exact while the planner's estimate of the filtered set is under the collection's
 * `countThreshold`, the estimate above it, so that the default chunk stays cheap at any size.
 */
export type CountMode = 'auto' | (typeof COUNT_MODES)[number];

/** `planned` is PostgREST's name for the planner's estimate: accepted as `estimated`. */
export function parseCountMode(params: QueryParams): CountMode {
  const value = params.get('count');
  if (value === undefined) return 'auto';
  if (value === 'planned') return 'estimated';
  if (!(COUNT_MODES as readonly string[]).includes(value)) {
    throw invalidParameter('count', 'must be one of exact, estimated (or planned), none');
  }
  return value as CountMode;
}

/** A chunk's size, and what finding it read. */
export interface Size {
  readonly size: number;
  /** Whether `size` is the planner's estimate rather than a count. */
  readonly estimated: boolean;
  /** The rows the count read (0 for an estimate): what the count is charged, once settled. */
  readonly counted: number;
}

function valuesOf(collection: Collection, filters: readonly Filter[]): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  filterValues(collection, filters, values);
  return values;
}

/**
 * How long an instance keeps a planner's estimate, per collection, filter shape and values, and how many it
 * keeps. The estimate moves only with the statistics (ANALYZE) and the table's size in pages, so a second's
 * old one is as good; kept, it spares the limiter's price of a count a round trip on every request, which is
 * what a storm of declined requests was made of (docs/reference/costs.md, "Counts"). Estimates asked for at once
 * share one EXPLAIN.
 */
const ESTIMATE_KEPT_MS = 1000;
const ESTIMATES_KEPT = 1000;

interface KeptEstimate {
  readonly until: number;
  readonly estimate: Promise<number>;
  /** Once the EXPLAIN answered: what it said, handed out without a turn of the event loop. */
  value?: number;
}

/**
 * Per pool (a replica's statistics are its own), in the order they were asked for.
 */
const keptEstimates = new WeakMap<Sql, Map<string, KeptEstimate>>();

/**
 * The planner's row estimate of the filtered set: a prepared EXPLAIN, which PostgreSQL plans for the values
 * on every call (the estimate depends on them: PostgREST's "planned" count), parsing it once per connection.
 * Fast at any size: it reads statistics, no rows. Kept for ESTIMATE_KEPT_MS; a kept one that has answered is
 * returned as a number, so that a request priced by it (lib/service/collection-request.ts) waits for nothing.
 */
export function estimateItems(
  database: Database,
  collection: Collection,
  filters: readonly Filter[],
  budget?: StatementBudget,
): number | Promise<number> {
  const values = valuesOf(collection, filters);
  const key = `${collectionKey(collection)}|estimate|${filtersKey(filters)}`;
  let kept = keptEstimates.get(database.sql);
  if (kept === undefined) {
    kept = new Map();
    keptEstimates.set(database.sql, kept);
  }
  const keptKey = `${key}|${JSON.stringify(values)}`;
  const now = performance.now();
  const hit = kept.get(keptKey);
  if (hit !== undefined && hit.until > now) return hit.value ?? hit.estimate;
  kept.delete(keptKey);
  if (kept.size >= ESTIMATES_KEPT) kept.delete(kept.keys().next().value!);
  const estimate = planRows(database, collection, filters, key, values, budget);
  const entry: KeptEstimate = { until: now + ESTIMATE_KEPT_MS, estimate };
  kept.set(keptKey, entry);
  estimate.then(
    (value) => {
      entry.value = value;
    },
    // A failed EXPLAIN is not kept: the next request asks again.
    () => {
      if (kept.get(keptKey) === entry) kept.delete(keptKey);
    },
  );
  return estimate;
}

async function planRows(
  database: Database,
  collection: Collection,
  filters: readonly Filter[],
  key: string,
  values: Record<string, unknown>,
  budget: StatementBudget | undefined,
): Promise<number> {
  const { drizzle } = database;
  const shape = shapeOf(database, key, () => {
    const query = drizzle.select({ one: sql`1` }).from(collection.table).where(filterCondition(collection, filters)).toSQL();
    return { toSQL: () => ({ ...query, sql: `explain (format json) ${query.sql}` }) };
  });
  const [row] = await runShape(database, shape, values, budget);
  const plan = (row?.[0] as [{ Plan: { 'Plan Rows': number } }] | undefined)?.[0]?.Plan;
  return Math.round(plan?.['Plan Rows'] ?? 0);
}

/**
 * The exact size of the filtered set, reading at most `cap` rows when a cap is given (a count over a
 * subquery with a LIMIT): the count stops at the cap, whatever the table's size.
 */
async function countRows(
  database: Database,
  collection: Collection,
  filters: readonly Filter[],
  budget: StatementBudget | undefined,
  cap?: number,
): Promise<number> {
  const { drizzle } = database;
  const key = `${collectionKey(collection)}|count|${filtersKey(filters)}|${cap ?? ''}`;
  const shape = shapeOf(database, key, () => {
    const where = filterCondition(collection, filters);
    if (cap === undefined) return drizzle.select({ n: sql<number>`count(*)` }).from(collection.table).where(where);
    const rows = drizzle.select({ one: sql`1` }).from(collection.table).where(where).limit(literalLimit(cap)).as('capped');
    return drizzle.select({ n: sql<number>`count(*)` }).from(rows);
  });
  const [row] = await runShape(database, shape, valuesOf(collection, filters), budget);
  return Number(row?.[0] ?? 0);
}

/**
 * The size of the filtered collection in `mode` (undefined for `none`). `estimate` is the planner's estimate
 * when the caller has it already (the rate limiter asks for it to price the count): not asked again.
 */
export async function countItems(
  database: Database,
  collection: Collection,
  filters: readonly Filter[],
  mode: CountMode,
  estimate: number | undefined,
  budget: StatementBudget | undefined,
): Promise<Size | undefined> {
  if (mode === 'none') return undefined;
  if (mode === 'exact') {
    const size = await countRows(database, collection, filters, budget);
    return { size, estimated: false, counted: size };
  }
  const planned = estimate ?? (await estimateItems(database, collection, filters, budget));
  const threshold = collection.countThreshold;
  if (mode === 'estimated' || planned >= threshold) return { size: planned, estimated: true, counted: 0 };
  // Under the threshold by the estimate: counted, but never past it, should the estimate be far too low.
  const counted = await countRows(database, collection, filters, budget, threshold + 1);
  return counted <= threshold
    ? { size: counted, estimated: false, counted }
    : { size: Math.max(planned, counted), estimated: true, counted };
}
