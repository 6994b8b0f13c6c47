// The rate-limit decision in PostgreSQL (one round trip), the lease release, housekeeping, and headers.
import type { Sql } from 'postgres';

export type Outcome = 'ok' | 'invalid_key' | 'rate' | 'concurrency';

export interface DecisionInput {
  /** SHA-256 of the API key; undefined for an anonymous request (counted by `ipSubject`). */
  readonly keyHash: Buffer | undefined;
  /** The subject when no valid key names the client, e.g. `ip:203.0.113.7` or `reg:2001:db8::/64`. */
  readonly ipSubject: string;
  /** The tier of `ipSubject`: `anonymous`, or `registration` for POST /v1/keys. */
  readonly ipTier: string;
  /** Units this request costs; the database caps it at the tier's allowance. */
  readonly cost: number;
  /** Lease time-to-live in seconds; 0 takes no lease (no concurrency cap). */
  readonly leaseTtl: number;
  /** Tests only: seconds added to the database clock. */
  readonly clockOffset: number;
}

export interface Decision {
  readonly outcome: Outcome;
  readonly subject: string;
  readonly tier: string;
  readonly keyId: string | undefined;
  readonly limit: number;
  readonly windowSeconds: number;
  readonly remaining: number;
  /** Unix seconds. Success: the whole allowance is back. 429: this request's cost first fits. */
  readonly reset: number;
  /** Seconds; set on a 429. */
  readonly retryAfter: number;
  /** floor(database now), Unix seconds. */
  readonly now: number;
  /** The concurrency lease this request holds, to be released when it ends. */
  readonly lease: Lease | undefined;
}

/** A slot of the subject's concurrency cap, and the token of this request's hold on it. */
export interface Lease {
  readonly slot: number;
  readonly token: string;
}

/** The one statement of a decision: key and tier lookup, the window, the lease and the charge. */
export async function decide(sql: Sql, input: DecisionInput): Promise<Decision> {
  const [row] = await sql`
    select * from rate_decide(${input.keyHash ?? null}, ${input.ipSubject}, ${input.ipTier},
                              ${input.cost}, ${input.leaseTtl}, ${input.clockOffset})`;
  if (!row) throw new Error('rate_decide returned no row');
  // bigint columns arrive as strings; all of them are far below 2^53.
  return {
    outcome: row.outcome as Outcome,
    subject: row.subject as string,
    tier: row.tier as string,
    keyId: (row.key_id as string | null) ?? undefined,
    limit: Number(row.allowance),
    windowSeconds: Number(row.window_seconds),
    remaining: Number(row.remaining),
    reset: Number(row.reset),
    retryAfter: Number(row.retry_after),
    now: Number(row.now_second),
    lease: row.lease_slot === null ? undefined : { slot: Number(row.lease_slot), token: String(row.lease_token) },
  };
}

/**
 * Group release: a lease ends with one statement for all the leases of this instance that ended while
 * the previous statement was in flight. Each caller still waits until its own lease is released (so a
 * client's next request never meets its previous one), at most about two round trips; under load many
 * requests share one statement.
 */
export function groupReleaser(sql: Sql): (subject: string, lease: Lease) => Promise<void> {
  type Pending = { subject: string; lease: Lease; done: (error?: unknown) => void };
  let waiting: Pending[] = [];
  let inFlight = false;

  async function flush(): Promise<void> {
    inFlight = true;
    while (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      try {
        await sql`select rate_release_many(${batch.map((p) => p.subject)}::text[], ${batch.map((p) => p.lease.slot)}::int[],
                                           ${batch.map((p) => p.lease.token)}::bigint[])`;
        for (const p of batch) p.done();
      } catch (error) {
        for (const p of batch) p.done(error);
      }
    }
    inFlight = false;
  }

  return function release(subject, lease) {
    return new Promise<void>((resolve, reject) => {
      waiting.push({ subject, lease, done: (error) => (error === undefined ? resolve() : reject(error)) });
      if (!inFlight) void flush();
    });
  };
}

/** Removes counters that no longer count and free slots; -1 when another instance holds the lock. */
export async function housekeep(sql: Sql, clockOffset = 0): Promise<number> {
  const [row] = await sql`select rate_housekeep(${clockOffset}) as removed`;
  return Number(row?.removed ?? 0);
}

/**
 * The headers of a rate-limited response (SPEC.md 2.2; API.md; draft-ietf-httpapi-ratelimit-headers):
 * X-RateLimit-* and the IETF RateLimit-Policy / RateLimit, whose `t` is the seconds until Reset.
 */
export function rateLimitHeaders(decision: Decision): Record<string, string> {
  const untilReset = Math.max(0, decision.reset - decision.now);
  const policy = JSON.stringify(decision.tier);
  return {
    'x-ratelimit-limit': String(decision.limit),
    'x-ratelimit-remaining': String(decision.remaining),
    'x-ratelimit-reset': String(decision.reset),
    'ratelimit-policy': `${policy};q=${decision.limit};w=${decision.windowSeconds}`,
    ratelimit: `${policy};r=${decision.remaining};t=${untilReset}`,
  };
}
