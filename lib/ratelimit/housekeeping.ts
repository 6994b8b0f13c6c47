// Housekeeping: the rows of subjects that have been quiet for a minute go away, removed by whichever
// instance holds the lock (docs/explanation/rate-limit.md, "How it runs in PostgreSQL").
import type { Sql } from 'postgres';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';

/** Removes the rows of subjects quiet for a minute; -1 when another instance holds the lock. */
export async function housekeep(sql: Sql, clockOffset = 0): Promise<number> {
  const [row] = await sql`select ${sql(SERVICE_SCHEMA)}.rate_housekeep(${clockOffset}) as removed`;
  return (row?.removed as number | undefined) ?? 0;
}

/**
 * What a request calls once it is decided: every `intervalMs` (0: never) this instance offers to do the
 * housekeeping, in the background. The instance's clock only schedules it; the rows' ages are read on the
 * database clock (moved by `clockOffset` in tests).
 */
export function housekeeper(sql: Sql, intervalMs: number, clockOffset: () => number): () => void {
  let last = performance.now();
  return function offer() {
    if (intervalMs <= 0 || performance.now() - last < intervalMs) return;
    last = performance.now();
    housekeep(sql, clockOffset()).catch(() => {}); // next time, or another instance
  };
}
