// The limiter client: rate-limit decisions and lease releases in PostgreSQL (batched, one round trip,
// with a deadline).
import type { PendingQuery, Row, Sql } from 'postgres';
import type { OwnConnection } from '../../db/client.ts';
import { answeredInTime } from '../http/deadline.ts';

type Outcome = 'ok' | 'invalid_key' | 'rate' | 'concurrency';

interface DecisionInput {
  /** SHA-256 of the API key; undefined for an anonymous request (counted by `ipSubject`). */
  readonly keyHash: Buffer | undefined;
  /** The subject when no valid key names the client, e.g. `ip:203.0.113.7` or `reg:2001:db8::/64`. */
  readonly ipSubject: string;
  /** The tier of `ipSubject`: `anonymous`, or `registration` for POST /v1/keys. */
  readonly ipTier: string;
  /** Units this request costs; the database caps it at the tier's allowance. */
  readonly cost: number;
  /** Tests only: seconds added to the database clock. */
  readonly clockOffset: number;
}

export interface Decision {
  readonly outcome: Outcome;
  readonly subject: string;
  readonly tier: string;
  readonly keyId: string | undefined;
  /** The tier's allowance per window: what X-RateLimit-Limit reports. */
  readonly allowance: number;
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
interface Lease {
  readonly slot: number;
  readonly token: string;
  /** performance.now() by which the lease has expired anyway: a release still owed then is dropped. */
  readonly expiresAt: number;
}

export interface Limiter {
  /**
   * Charges the request and takes its lease, or declines it. Once `signal` aborts (its caller stopped
   * waiting), a decision not yet sent never is, so that a request already answered 503 is not charged
   * later and holds no lease; it rejects with the signal's reason.
   */
  decide(input: DecisionInput, signal?: AbortSignal): Promise<Decision>;
  /**
   * The request of `signal` stopped waiting for its decision (it was answered 503; `signal` has aborted).
   * A statement carrying the decision that postgres.js has not yet handed to a connection (it waits for
   * one to connect) must then never go: the connection is renewed, which rejects it. One already on the
   * wire may still be made; the caller gives its lease back.
   */
  abandoned(signal: AbortSignal): void;
  /**
   * Ends a lease; resolves once the slot is free for the subject's next request, at any instance. When it
   * fails (the database is away), it rejects, and the release is kept and sent again with the limiter's
   * next statements until the database takes it or the lease has expired anyway.
   */
  release(subject: string, lease: Lease): Promise<void>;
}

interface PendingDecision {
  readonly input: DecisionInput;
  readonly signal: AbortSignal | undefined;
  resolve(decision: Decision): void;
  reject(error: unknown): void;
}

interface PendingRelease {
  readonly subject: string;
  readonly lease: Lease;
  resolve(): void;
  reject(error: unknown): void;
}

/** A statement handed to postgres.js, on the client `sql`. */
interface Statement {
  readonly sql: Sql;
  readonly batch: readonly PendingDecision[];
  readonly query: PendingQuery<Row[]>;
  settled: boolean;
}

/**
 * Statements the limiter keeps on the wire at once. The second goes out while the first runs, behind it
 * on the one connection (postgres.js pipelines them): the backend starts it as soon as the first commits,
 * with no round trip through this process in between. A third would only wait in the socket.
 */
const PIPELINE_DEPTH = 2;

/** Failed releases kept for another try; beyond this, the oldest (the first to expire anyway) are dropped. */
const MAX_OWED_RELEASES = 10_000;

/** How soon failed releases are tried again when no other statement carries them. */
const RELEASE_RETRY_MS = 250;

/** A plain client (tests) is never replaced; its statements still settle by this deadline. */
const PLAIN_CLIENT_DEADLINE_MS = 60_000;

function plainConnection(sql: Sql): OwnConnection {
  return { sql, deadlineMs: PLAIN_CLIENT_DEADLINE_MS, renew() {} };
}

function ignore(): void {}

/**
 * The limiter's client. It keeps at most PIPELINE_DEPTH statements in flight: whatever is asked for
 * meanwhile, the decisions of requests that begin and the lease releases of requests that end, goes to
 * the database as the next statement, rate_decide (or rate_release when it holds releases only), sent once
 * one in flight has answered. Idle, a decision goes at once (in the next turn of the event loop); under
 * load, requests share a statement, its commit and a wake-up of the database backend, with no timer to
 * wait for, and each waits at most for the statements in flight before its own. `connection` should be
 * the limiter's own (Database.limiter), so that decisions never queue behind slow data queries.
 *
 * Every statement has a deadline (the connection's): past it, the connection is taken for dead and
 * replaced, and what was on it is rejected, never sent again. The statements in flight are counted on the
 * current connection only, so one that never settles cannot hold the pipeline. `leaseTtl` is the lease
 * time-to-live in seconds; 0 takes no lease (no concurrency cap).
 */
export function databaseLimiter(connection: OwnConnection | Sql, leaseTtl: number): Limiter {
  const own = typeof connection === 'function' ? plainConnection(connection) : connection;
  let decisions: PendingDecision[] = [];
  let releases: PendingRelease[] = [];
  /** Releases that failed, sent again with the next statement (or on a timer) while their lease lives. */
  let owed: PendingRelease[] = [];
  let retryTimer: NodeJS.Timeout | undefined;
  let scheduled = false;
  /** The statements in flight, each with the client it was sent on. */
  const inFlight = new Set<Statement>();

  function onCurrentConnection(): number {
    let count = 0;
    for (const statement of inFlight) if (statement.sql === own.sql) count++;
    return count;
  }

  function schedule(): void {
    if (scheduled || onCurrentConnection() >= PIPELINE_DEPTH) return;
    scheduled = true;
    setImmediate(flush);
  }

  function owe(failed: PendingRelease[]): void {
    const now = performance.now();
    for (const { subject, lease } of failed) {
      if (lease.expiresAt > now) owed.push({ subject, lease, resolve: ignore, reject: ignore });
    }
    if (owed.length > MAX_OWED_RELEASES) owed.splice(0, owed.length - MAX_OWED_RELEASES);
    if (owed.length > 0 && retryTimer === undefined) {
      retryTimer = setTimeout(() => {
        retryTimer = undefined;
        if (owed.length > 0) schedule();
      }, RELEASE_RETRY_MS);
      retryTimer.unref();
    }
  }

  function takeOwed(): PendingRelease[] {
    if (owed.length === 0) return owed;
    const now = performance.now();
    const live = owed.filter((pending) => pending.lease.expiresAt > now);
    owed = [];
    return live;
  }

  function flush(): void {
    scheduled = false;
    const batch: PendingDecision[] = [];
    for (const pending of decisions) {
      if (pending.signal?.aborted) pending.reject(pending.signal.reason);
      else batch.push(pending);
    }
    const ending = owed.length === 0 ? releases : releases.concat(takeOwed());
    decisions = [];
    releases = [];
    if (batch.length === 0 && ending.length === 0) return;
    const sql = own.sql;
    const statement: Statement = { sql, batch, query: send(sql, batch, ending), settled: false };
    inFlight.add(statement);
    answeredInTime(own, sql, statement.query)
      .then((rows) => {
        if (!answers(rows, batch.length)) {
          // Not this statement's answer: taken as a failure, so its releases are kept, and the connection
          // (whose exchange is out of step) is replaced.
          own.renew(sql);
          throw new Error(`Limiter statement: expected ${Math.max(batch.length, 1)} rows, got ${rows.length}`);
        }
        for (const pending of ending) pending.resolve();
        if (batch.length === 0) return; // rate_release
        for (const row of rows) batch[(row.idx as number) - 1]!.resolve(decisionOf(row, leaseTtl));
      })
      .catch((error: unknown) => {
        for (const pending of batch) pending.reject(error);
        for (const pending of ending) pending.reject(error);
        owe(ending);
      })
      .finally(() => {
        statement.settled = true;
        inFlight.delete(statement);
        if (decisions.length > 0 || releases.length > 0) schedule();
      });
  }

  function send(sql: Sql, batch: PendingDecision[], ending: PendingRelease[]): PendingQuery<Row[]> {
    const subjects = arrayLiteral(ending.map((pending) => pending.subject));
    const slots = arrayLiteral(ending.map((pending) => pending.lease.slot));
    const tokens = arrayLiteral(ending.map((pending) => pending.lease.token));
    if (batch.length === 0) {
      return sql`select rate_release(${subjects}::text[], ${slots}::int[], ${tokens}::bigint[])`;
    }
    const inputs = batch.map((pending) => pending.input);
    // Key hashes travel in hex, cast back in rate_decide.
    return sql`
      select * from rate_decide(
        ${arrayLiteral(inputs.map((input) => input.keyHash?.toString('hex') ?? null))}::text[],
        ${arrayLiteral(inputs.map((input) => input.ipSubject))}::text[], ${arrayLiteral(inputs.map((input) => input.ipTier))}::text[],
        ${arrayLiteral(inputs.map((input) => input.cost))}::int[], ${arrayLiteral(inputs.map((input) => input.clockOffset))}::float8[],
        ${leaseTtl}, ${subjects}::text[], ${slots}::int[], ${tokens}::bigint[])`;
  }

  return {
    decide(input, signal) {
      return new Promise<Decision>((resolve, reject) => {
        decisions.push({ input, signal, resolve, reject });
        schedule();
      });
    },
    abandoned(signal) {
      // A rare path (a 503): the few statements in flight are searched, nothing is kept per request.
      for (const statement of inFlight) {
        const waiting = !statement.settled && (statement.query as { state?: unknown }).state === null;
        if (waiting && statement.batch.some((pending) => pending.signal === signal)) own.renew(statement.sql);
      }
    },
    release(subject, lease) {
      return new Promise<void>((resolve, reject) => {
        releases.push({ subject, lease, resolve, reject });
        schedule();
      });
    },
  };
}

/**
 * A PostgreSQL array literal (`{"a",NULL,"b"}`), sent as text and cast in SQL. The limiter's connection
 * does not fetch array types (Database.limiter): postgres.js would serialize a JS array only with them.
 */
function arrayLiteral(values: readonly (string | number | null)[]): string {
  const elements = values.map((value) =>
    value === null ? 'NULL' : typeof value === 'number' ? String(value) : `"${value.replace(/[\\"]/g, '\\$&')}"`,
  );
  return `{${elements.join(',')}}`;
}

/**
 * Whether `rows` answer a statement of `decisions` decisions: one row per decision, each numbered, or
 * rate_release's one row. postgres.js was seen to settle a statement held across reconnection attempts
 * with an empty result it never ran: a release so settled must be kept, not taken as done.
 */
function answers(rows: readonly Record<string, unknown>[], decisions: number): boolean {
  if (decisions === 0) return rows.length === 1 && 'rate_release' in rows[0]!;
  if (rows.length !== decisions) return false;
  const seen = new Set<unknown>();
  for (const row of rows) {
    if (typeof row.idx !== 'number' || row.idx < 1 || row.idx > decisions) return false;
    seen.add(row.idx);
  }
  return seen.size === decisions;
}

function decisionOf(row: Record<string, unknown>, leaseTtl: number): Decision {
  return {
    outcome: row.outcome as Outcome,
    subject: row.subject as string,
    tier: row.tier as string,
    keyId: (row.key_id as string | null) ?? undefined,
    allowance: row.allowance as number,
    windowSeconds: row.window_seconds as number,
    remaining: row.remaining as number,
    reset: row.reset as number,
    retryAfter: row.retry_after as number,
    now: row.now_second as number,
    lease:
      row.lease_slot === null
        ? undefined
        : // The database counts the TTL from its decision, a little before this answer: never later than this.
          { slot: row.lease_slot as number, token: String(row.lease_token), expiresAt: performance.now() + leaseTtl * 1000 },
  };
}
