// Housekeeping: the rows of subjects that have been quiet for a minute go away, removed by whichever
// instance holds the lock (docs/rate-limit.md, "In PostgreSQL").
import type { Sql } from 'postgres';

/** Removes the rows of subjects quiet for a minute; -1 when another instance holds the lock. */
export async function housekeep(sql: Sql, clockOffset = 0): Promise<number> {
  const [row] = await sql`select rate_housekeep(${clockOffset}) as removed`;
  return (row?.removed as number | undefined) ?? 0;
}

