// The size of a filtered collection: exact (count(*)), estimated (the planner's estimate), or none.
import { sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { invalidParameter } from '../http/errors.ts';
import { type Filter, filterCondition, filtersKey, filterValues } from './filters.ts';
import type { QueryParams } from './params.ts';
import type { Collection } from './registry.ts';
import { collectionKey, runShape, shapeOf } from './shapes.ts';

/** The values of `count`, the default first. */
export const COUNT_MODES = ['exact', 'estimated', 'none'] as const;
export type CountMode = (typeof COUNT_MODES)[number];

/** `planned` is PostgREST's name for the planner's estimate: accepted as `estimated`. */
export function parseCountMode(params: QueryParams): CountMode {
  const value = params.get('count') ?? 'exact';
  if (value === 'planned') return 'estimated';
  if (!(COUNT_MODES as readonly string[]).includes(value)) {
    throw invalidParameter('count', 'must be one of exact, estimated (or planned), none');
  }
  return value as CountMode;
}

/**
 * The size of the filtered collection in `mode`. Both counts are shapes (lib/pagination/shapes.ts): the exact
 * one a prepared count(*); the estimate a prepared EXPLAIN, which PostgreSQL plans for the values on every
 * call (the estimate depends on them: PostgREST's "planned" count), parsing it once per connection.
 */
export async function countItems(
  database: Database,
  collection: Collection,
  filters: readonly Filter[],
  mode: CountMode,
): Promise<number | undefined> {
  if (mode === 'none') return undefined;
  const { drizzle } = database;
  const values: Record<string, unknown> = {};
  filterValues(collection, filters, values);
  const where = () => filterCondition(collection, filters);
  if (mode === 'exact') {
    const key = `${collectionKey(collection)}|count|${filtersKey(filters)}`;
    const shape = shapeOf(database, key, () => drizzle.select({ n: sql<number>`count(*)` }).from(collection.table).where(where()));
    const [row] = await runShape(database, shape, values);
    return (row?.[0] as number | undefined) ?? 0;
  }
  // The planner's row estimate for the same WHERE: fast at any size.
  const key = `${collectionKey(collection)}|estimate|${filtersKey(filters)}`;
  const shape = shapeOf(database, key, () => {
    const query = drizzle.select({ one: sql`1` }).from(collection.table).where(where()).toSQL();
    return { toSQL: () => ({ ...query, sql: `explain (format json) ${query.sql}` }) };
  });
  const [row] = await runShape(database, shape, values);
  const plan = (row?.[0] as [{ Plan: { 'Plan Rows': number } }] | undefined)?.[0]?.Plan;
  return Math.round(plan?.['Plan Rows'] ?? 0);
}
