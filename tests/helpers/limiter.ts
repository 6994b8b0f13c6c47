// The rate limiter's state in a test database, and its headers on a response.
import type { Sql } from 'postgres';
import type { TestDatabase } from './db.ts';

/** A limiter decision's input for an anonymous client at `address`, costing one unit. */
export function anonymousInput(address: string) {
  return { keyHash: undefined, ipSubject: `ip:${address}`, ipTier: 'anonymous', cost: 1, clockOffset: 0 };
}

/** Sets a tier's values directly in the database, creating the tier if need be. */
export async function setTier(
  sql: Sql,
  name: string,
  tier: { allowance: number; windowSeconds: number; concurrency: number },
): Promise<void> {
  await sql`
    insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency)
    values (${name}, ${tier.allowance}, ${tier.windowSeconds}, ${tier.concurrency})
    on conflict (name) do update set allowance = excluded.allowance,
      window_seconds = excluded.window_seconds, concurrency = excluded.concurrency`;
}

/** The rate-limit headers of a response as numbers. */
export function limits(res: Response): { limit: number; remaining: number; reset: number; retryAfter: number | undefined } {
  const retry = res.headers.get('retry-after');
  return {
    limit: Number(res.headers.get('x-ratelimit-limit')),
    remaining: Number(res.headers.get('x-ratelimit-remaining')),
    reset: Number(res.headers.get('x-ratelimit-reset')),
    retryAfter: retry === null ? undefined : Number(retry),
  };
}

/** The database's clock, in Unix seconds (fractional). */
export async function dbNow(database: TestDatabase): Promise<number> {
  const [row] = await database.sql`select extract(epoch from clock_timestamp())::float8 as now`;
  return Number(row!.now);
}

/** Units charged to `subject` (to every subject when absent) that rate_windows still holds. */
export async function chargedUnits(sql: Sql, subject?: string): Promise<number> {
  const [row] = await sql`
    select coalesce(sum(used), 0)::int as units from paginated_collections.rate_windows where ${subject === undefined ? sql`true` : sql`subject = ${subject}`}`;
  return row!.units as number;
}

/** Concurrency leases of `subject` (of every subject when absent) that are held now. */
export async function liveLeases(sql: Sql, subject?: string): Promise<number> {
  const [row] = await sql`
    select count(*)::int as n from paginated_collections.rate_windows w, unnest(w.lease_expires) as e
    where e > extract(epoch from clock_timestamp()) and ${subject === undefined ? sql`true` : sql`w.subject = ${subject}`}`;
  return row!.n as number;
}
