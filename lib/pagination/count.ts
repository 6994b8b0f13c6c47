// The size of a filtered collection: exact (count(*)), estimated (the planner's estimate), or none.
import { type SQL, sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { invalidParameter } from '../http/errors.ts';
import type { QueryParams } from './params.ts';
import type { Collection } from './registry.ts';

export type CountMode = 'exact' | 'estimated' | 'none';

export function parseCountMode(params: QueryParams): CountMode {
  const value = params.get('count') ?? 'exact';
  if (value !== 'exact' && value !== 'estimated' && value !== 'none') {
    throw invalidParameter('count', 'must be one of exact, estimated, none');
  }
  return value;
}

export async function countItems(
  database: Database,
  collection: Collection,
  where: SQL | undefined,
  mode: CountMode,
): Promise<number | undefined> {
  if (mode === 'none') return undefined;
  const { drizzle, sql: client } = database;
  if (mode === 'exact') {
    const [row] = await drizzle.select({ n: sql<number>`count(*)` }).from(collection.table).where(where);
    return row?.n ?? 0;
  }
  // The planner's row estimate for the same WHERE: fast at any size (PostgREST's "planned" count).
  const query = drizzle.select({ one: sql`1` }).from(collection.table).where(where).toSQL();
  const [row] = await client.unsafe(`explain (format json) ${query.sql}`, query.params as never[]);
  const plan = (row?.['QUERY PLAN'] as [{ Plan: { 'Plan Rows': number } }] | undefined)?.[0]?.Plan;
  return Math.round(plan?.['Plan Rows'] ?? 0);
}
