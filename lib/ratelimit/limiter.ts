// The limiter client: rate-limit decisions and lease releases in PostgreSQL (batched, one round trip,
// one deadline per batch).
import type { PendingQuery, Row, Sql } from 'postgres';
import type { OwnConnection } from '../../db/client.ts';
import { awaitingConnection, writeWhenHanded } from '../../db/driver.ts';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';
import { answeredInTime } from '../http/deadline.ts';
import { isDatabaseUnavailable, isReadOnlyRefusal, isRefusedByServer, unavailable } from '../http/errors.ts';

/**
 * `cost`: the request costs more than the tier's whole allowance, refused as such (nothing charged).
 * `unknown_tier`: no live key, and `ipTier` names no tier; nothing charged, no lease, the tier's figures 0.
 */
type Outcome = 'ok' | 'invalid_key' | 'rate' | 'concurrency' | 'cost' | 'unknown_tier';

/**
 * What a key may read (docs/reference/api.md, "Keys: scopes and claims"), as its row held it when the decision
 * was made: read by the decision's own lookup of the key, so a change through /admin applies from the key's next
 * request on, at every instance.
 */
export interface KeyScope {
  /** The collections the key may read; undefined: every collection. */
  readonly collections: readonly string[] | undefined;
  /** What the collections' row rules compare with; `{}` for a key without claims. */
  readonly claims: Readonly<Record<string, unknown>>;
}

interface DecisionInput {
  /** SHA-256 of the API key; undefined for an anonymous request (counted by `ipSubject`). */
  readonly keyHash: Buffer | undefined;
  /** The subject when no valid key names the client, e.g. `ip:203.0.113.7` or `reg:2001:db8::/64`. */
  readonly ipSubject: string;
  /** The tier of `ipSubject`: `anonymous`, or `registration` for POST /v1/keys; one that does not exist is `unknown_tier`. */
  readonly ipTier: string;
  /** Units this request costs; above the tier's allowance it is refused (an invalid key's is capped at it). */
  readonly cost: number;
  /** Tests only: seconds added to the database clock. */
  readonly clockOffset: number;
}

export interface Decision {
  readonly outcome: Outcome;
  readonly subject: string;
  readonly tier: string;
  readonly keyId: string | undefined;
  /** The key's collections and claims: set exactly when a live key was found (`keyId` set), whatever the outcome. */
  readonly scope: KeyScope | undefined;
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
  /** Units charged: the cost (an invalid key's capped at the allowance); 0 when declined. */
  readonly charged: number;
  /** The tier's cap on requests in flight. */
  readonly concurrency: number;
}

/**
 * Units a lease's release gives back (a 304's: docs/reference/costs.md, "Conditional requests"): what
 * its decision charged, and the expiry of the bucket they went into, which is the decision's `reset`.
 * Negative: units charged after the fact, a debt kept over later windows of `windowSeconds`, at most
 * `allowance` a window (docs/explanation/budgets.md, "Debts"); without them, all in that one bucket.
 */
interface Refund {
  readonly units: number;
  readonly bucketExpiry: number;
  readonly allowance?: number;
  readonly windowSeconds?: number;
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
   * Charges the request and takes its lease, or declines it. Rejects with a 503 (`unavailable`) once the
   * limiter's timeout has passed since the call with no answer, and gives the decision up, so that a
   * request answered 503 is not charged later and holds no lease: a decision not yet sent never is (one
   * that postgres.js holds waiting for a connection is rejected by renewing the connection); one already
   * on the wire may still be made, and the lease it takes is given back. Likewise, with the signal's
   * reason, for a decision not yet sent once `signal` aborts (its caller stopped waiting).
   */
  decide(input: DecisionInput, signal?: AbortSignal): Promise<Decision>;
  /**
   * Ends a lease; resolves once the slot is free for the subject's next request, at any instance. Rejects
   * when the database fails it (it is away), or with a 503 once the timeout has passed; the release itself
   * goes on: one that failed is kept and sent again with the limiter's next statements until the database
   * takes it or the lease has expired anyway. `refund`: units given back with it, in the same statement;
   * the database gives them back with the lease's first release only, so a release sent again never
   * refunds twice.
   */
  release(subject: string, lease: Lease, refund?: Refund): Promise<void>;
}

/** A caller waiting for the limiter: a decision, or a release. */
interface Waiter {
  /** performance.now() past which the caller is answered 503 (Infinity: never). */
  readonly deadline: number;
  /** Answered, failed or given up on: the caller is told nothing more. */
  settled: boolean;
  reject(error: unknown): void;
}

interface PendingDecision extends Waiter {
  readonly input: DecisionInput;
  readonly signal: AbortSignal | undefined;
  /** Sent once already, in a statement that failed with nothing committed: it is not sent a third time. */
  retried: boolean;
  resolve(decision: Decision): void;
}

interface PendingRelease extends Waiter {
  readonly subject: string;
  readonly lease: Lease;
  readonly refund: Refund | undefined;
  resolve(): void;
}

/**
 * What goes to the database as one statement: the decisions and releases asked for while it was collected,
 * with one timer for all their deadlines. It is set for the first one's, and, should it fire, again for
 * the earliest of those still waiting; it is cleared once the statement has answered, which under load is
 * long before, so a batch of many requests costs one timer set and cleared.
 */
interface Batch {
  /** Once sent: the decisions of the statement, in the order of its rows' `idx`. */
  decisions: PendingDecision[];
  readonly releases: PendingRelease[];
  timer: NodeJS.Timeout | undefined;
  /** Once sent: the statement, on the client `sql`. */
  statement: { readonly sql: Sql; readonly query: PendingQuery<Row[]> } | undefined;
  /** The statement has answered or failed. */
  done: boolean;
}

/**
 * Statements the limiter keeps on the wire at once. The second goes out while the first runs, behind it
 * on the one connection (postgres.js pipelines them): the backend starts it as soon as the first commits,
 * with no round trip through this process in between. A third would only wait in the socket. On a
 * connection that may not pipeline (behind a transaction pooler) one: the next batch collects meanwhile.
 */
const PIPELINE_DEPTH = 2;

/** Failed releases kept for another try; beyond this, the oldest (the first to expire anyway) are dropped. */
const MAX_OWED_RELEASES = 10_000;

/** How soon failed releases are tried again when no other statement carries them. */
const RELEASE_RETRY_MS = 250;

/** A plain client (tests) is never replaced; its statements still settle by this deadline. */
const PLAIN_CLIENT_DEADLINE_MS = 60_000;

function plainConnection(sql: Sql): OwnConnection {
  return { sql, deadlineMs: PLAIN_CLIENT_DEADLINE_MS, pipelining: true, renew() {} };
}

function ignore(): void {}

/** A release nobody waits for: one tried again, or the lease of a decision given up on. */
function unwaited(subject: string, lease: Lease, refund?: Refund): PendingRelease {
  return { subject, lease, refund, deadline: Number.POSITIVE_INFINITY, settled: true, resolve: ignore, reject: ignore };
}

/**
 * The limiter's client. It keeps at most PIPELINE_DEPTH statements in flight (one without pipelining): whatever is asked for
 * meanwhile, the decisions of requests that begin and the lease releases of requests that end, goes to
 * the database as the next statement, rate_decide (or rate_release when it holds releases only), sent once
 * one in flight has answered. Idle, a decision goes at once (in the next turn of the event loop); under
 * load, requests share a statement, its commit and a wake-up of the database backend, with no timer to
 * wait for, and each waits at most for the statements in flight before its own. Releases alone wait for a
 * statement in flight rather than take the second place: a decision asked for meanwhile carries them, so a
 * client's release and its next decision often share a statement. `connection` should be
 * the limiter's own (Database.limiter), so that decisions never queue behind slow data queries.
 *
 * Every statement has a deadline (the connection's): past it, the connection is taken for dead and
 * replaced, and what was on it is rejected, never sent again. The statements in flight are counted on the
 * current connection only, so one that never settles cannot hold the pipeline. `leaseTtl` is the lease
 * time-to-live in seconds; 0 takes no lease (no concurrency cap). `timeoutMs` is how long a caller waits
 * for its decision or release before it is answered 503 (default: for as long as the statement takes).
 * `onStatement` is told of each statement sent, with the number of decisions it carries (metrics).
 */
export function databaseLimiter(
  connection: OwnConnection | Sql,
  leaseTtl: number,
  timeoutMs = Number.POSITIVE_INFINITY,
  onStatement?: (decisions: number) => void,
): Limiter {
  const own = typeof connection === 'function' ? plainConnection(connection) : connection;
  const depth = own.pipelining ? PIPELINE_DEPTH : 1;
  /** The batch that the next statement will carry, if anything was asked for since the last one went. */
  let collecting: Batch | undefined;
  /** Releases that failed, sent again with the next statement (or on a timer) while their lease lives. */
  let owed: PendingRelease[] = [];
  let retryTimer: NodeJS.Timeout | undefined;
  let scheduled = false;
  /** The batches whose statement is in flight. */
  const inFlight = new Set<Batch>();
  /**
   * A client whose server refused a statement as read-only (a primary being demoted, or a standby): renewed, so
   * that the next statements go to a fresh connection, which target_session_attrs leads to the new primary.
   */
  let readOnly: Sql | undefined;

  function onCurrentConnection(): number {
    let count = 0;
    for (const batch of inFlight) if (batch.statement!.sql === own.sql) count++;
    return count;
  }

  /**
   * Whether the current connection may take a statement. Nothing more goes to a server that refused one as
   * read-only: its connection is renewed once the statements on it have settled (each is refused too, and may
   * be sent again on the fresh one).
   */
  function writable(): boolean {
    if (readOnly === undefined) return true;
    if (readOnly === own.sql && onCurrentConnection() > 0) return false;
    if (readOnly === own.sql) own.renew(readOnly);
    readOnly = undefined;
    return true;
  }

  function schedule(): void {
    if (scheduled || !writable()) return;
    const sending = onCurrentConnection();
    // Releases alone wait for the statement in flight: a decision may come meanwhile to carry them.
    if (sending >= (collecting !== undefined && collecting.decisions.length === 0 ? 1 : depth)) return;
    scheduled = true;
    setImmediate(flushAtOnce);
  }

  /** Sends the batch, written when handed (writeWhenHanded): not a turn later, behind what the next poll reads. */
  function flushAtOnce(): void {
    flush();
    writeWhenHanded(own.sql);
  }

  /** The batch being collected, begun (and its timer set for its first caller's deadline) if need be. */
  function collect(): Batch {
    if (collecting) return collecting;
    const batch: Batch = { decisions: [], releases: [], timer: undefined, statement: undefined, done: false };
    if (timeoutMs !== Number.POSITIVE_INFINITY) watch(batch, timeoutMs);
    collecting = batch;
    return batch;
  }

  /**
   * The batch's timer. It checks one turn of the event loop after it fires: when the process itself was
   * held up (a long synchronous task, a paused machine), an answer that arrived meanwhile is read in
   * between, and it wins.
   */
  function watch(batch: Batch, ms: number): void {
    batch.timer = setTimeout(() => setImmediate(expire, batch), ms);
  }

  /** The batch's timer, set again for the earliest deadline of its callers (one sent again may be due before it). */
  function rewatch(batch: Batch): void {
    const earliest = Math.min(...batch.decisions.map((pending) => pending.deadline), ...batch.releases.map((pending) => pending.deadline));
    if (earliest === Number.POSITIVE_INFINITY) return;
    clearTimeout(batch.timer);
    watch(batch, Math.max(earliest - performance.now(), 0));
  }

  /** Answers 503 to the batch's callers past their deadline; the timer is set again for the others. */
  function expire(batch: Batch): void {
    batch.timer = undefined;
    if (batch.done) return;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    let gaveUp = false;
    for (const waiter of [...batch.decisions, ...batch.releases]) {
      if (waiter.settled) continue;
      if (waiter.deadline > now) {
        next = Math.min(next, waiter.deadline);
        continue;
      }
      waiter.settled = true;
      waiter.reject(unavailable());
      if ('input' in waiter) gaveUp = true;
    }
    // A statement that postgres.js has not yet handed to a connection (it waits for one to connect) must
    // then never go: the connection is renewed, which rejects it. One already on the wire may still be
    // made: the leases it takes for callers given up on are given back.
    const statement = batch.statement;
    if (gaveUp && statement && awaitingConnection(statement.query)) own.renew(statement.sql);
    if (next !== Number.POSITIVE_INFINITY) watch(batch, next - now);
  }

  function owe(failed: PendingRelease[]): void {
    const now = performance.now();
    for (const { subject, lease, refund } of failed) {
      if (lease.expiresAt > now) owed.push(unwaited(subject, lease, refund));
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
    const now = performance.now();
    const live = owed.filter((pending) => pending.lease.expiresAt > now);
    owed = [];
    return live;
  }

  function flush(): void {
    scheduled = false;
    // A refusal read after this flush was scheduled (in the same turn of the event loop) holds the batch back
    // until the refusing connection is renewed: sent on it, the decisions sent again would be refused twice.
    if (!writable()) return;
    const batch = collecting ?? { decisions: [], releases: [], timer: undefined, statement: undefined, done: false };
    collecting = undefined;
    const decisions: PendingDecision[] = [];
    for (const pending of batch.decisions) {
      if (pending.settled) continue; // answered 503 by its deadline: never sent
      if (pending.signal?.aborted) {
        pending.settled = true;
        pending.reject(pending.signal.reason);
      } else {
        decisions.push(pending);
      }
    }
    batch.decisions = decisions;
    if (owed.length > 0) batch.releases.push(...takeOwed());
    const releases = batch.releases;
    if (decisions.length === 0 && releases.length === 0) {
      clearTimeout(batch.timer);
      return;
    }
    const sql = own.sql;
    batch.statement = { sql, query: send(sql, decisions, releases) };
    onStatement?.(decisions.length);
    inFlight.add(batch);
    answeredInTime(own, sql, batch.statement.query)
      .then((rows) => {
        if (!answers(rows, decisions.length)) {
          // Not this statement's answer: taken as a failure, so its releases are kept, and the connection
          // (whose exchange is out of step) is replaced.
          own.renew(sql);
          throw new Error(`Limiter statement: expected ${Math.max(decisions.length, 1)} rows, got ${rows.length}`);
        }
        for (const pending of releases) {
          pending.settled = true;
          pending.resolve();
        }
        if (decisions.length === 0) return; // rate_release
        for (const row of rows) {
          const pending = decisions[(row.idx as number) - 1]!;
          const decision = decisionOf(row, leaseTtl);
          if (!pending.settled) {
            pending.settled = true;
            pending.resolve(decision);
          } else if (decision.lease) {
            // Its caller was answered 503 meanwhile: the lease goes back.
            collect().releases.push(unwaited(decision.subject, decision.lease));
          }
        }
      })
      .catch((error: unknown) => {
        if (isReadOnlyRefusal(error) && sql === own.sql) readOnly = sql;
        // A statement that failed with nothing committed (never sent, or refused by the server as its primary goes
        // away) is sent once more, on a fresh connection: to the new primary, or failing again to a 503. One that
        // was sent and whose answer was lost may have been committed: sent again, it would charge twice.
        const again = isDatabaseUnavailable(error) && (awaitingConnection(batch.statement!.query) || isRefusedByServer(error));
        const retried: PendingDecision[] = [];
        for (const pending of decisions) {
          if (pending.settled) continue;
          if (again && !pending.retried && !pending.signal?.aborted) {
            pending.retried = true;
            retried.push(pending);
            continue;
          }
          pending.settled = true;
          pending.reject(error);
        }
        if (retried.length > 0) {
          const next = collect();
          next.decisions.push(...retried);
          rewatch(next);
        }
        for (const pending of releases) {
          if (pending.settled) continue;
          pending.settled = true;
          pending.reject(error);
        }
        owe(releases);
      })
      .finally(() => {
        batch.done = true;
        clearTimeout(batch.timer);
        inFlight.delete(batch);
        if (collecting) schedule();
      });
  }

  function send(sql: Sql, batch: PendingDecision[], ending: PendingRelease[]): PendingQuery<Row[]> {
    const subjects = arrayLiteral(ending.map((pending) => pending.subject));
    const slots = arrayLiteral(ending.map((pending) => pending.lease.slot));
    const tokens = arrayLiteral(ending.map((pending) => pending.lease.token));
    const refunds = arrayLiteral(ending.map((pending) => pending.refund?.units ?? 0));
    const expiries = arrayLiteral(ending.map((pending) => pending.refund?.bucketExpiry ?? 0));
    const allowances = arrayLiteral(ending.map((pending) => pending.refund?.allowance ?? null));
    const windows = arrayLiteral(ending.map((pending) => pending.refund?.windowSeconds ?? null));
    if (batch.length === 0) {
      return sql`select ${sql(SERVICE_SCHEMA)}.rate_release(${subjects}::text[], ${slots}::int[], ${tokens}::bigint[], ${refunds}::int[], ${expiries}::bigint[],
        ${allowances}::int[], ${windows}::int[])`;
    }
    const inputs = batch.map((pending) => pending.input);
    // Key hashes travel in hex, cast back in rate_decide.
    const keyHashes = arrayLiteral(inputs.map((input) => input.keyHash?.toString('hex') ?? null));
    const ipSubjects = arrayLiteral(inputs.map((input) => input.ipSubject));
    const ipTiers = arrayLiteral(inputs.map((input) => input.ipTier));
    const costs = arrayLiteral(inputs.map((input) => input.cost));
    const clockOffsets = arrayLiteral(inputs.map((input) => input.clockOffset));
    const commit = own.synchronousCommit;
    if (commit === undefined) {
      return sql`
        select * from ${sql(SERVICE_SCHEMA)}.rate_decide(${keyHashes}::text[], ${ipSubjects}::text[], ${ipTiers}::text[],
          ${costs}::int[], ${clockOffsets}::float8[], ${leaseTtl}, ${subjects}::text[], ${slots}::int[], ${tokens}::bigint[],
          ${refunds}::int[], ${expiries}::bigint[], ${allowances}::int[], ${windows}::int[])`;
    }
    // The decisions' synchronous_commit, when it is not rate_decide's own `off`: set for the statement's transaction
    // by its last argument, which PostgreSQL evaluates before the function runs (db/functions/rate_decide.sql). One
    // statement either way, written whole: a fragment for the last argument would be one more object a statement.
    return sql`
      select * from ${sql(SERVICE_SCHEMA)}.rate_decide(${keyHashes}::text[], ${ipSubjects}::text[], ${ipTiers}::text[],
        ${costs}::int[], ${clockOffsets}::float8[], ${leaseTtl}, ${subjects}::text[], ${slots}::int[], ${tokens}::bigint[],
        ${refunds}::int[], ${expiries}::bigint[], ${allowances}::int[],
        (select ${windows}::int[] where set_config('paginated_collections.limiter_synchronous_commit', ${commit}, true) <> ''))`;
  }

  const deadline = () => (timeoutMs === Number.POSITIVE_INFINITY ? timeoutMs : performance.now() + timeoutMs);

  return {
    decide(input, signal) {
      return new Promise<Decision>((resolve, reject) => {
        collect().decisions.push({ input, signal, deadline: deadline(), settled: false, retried: false, resolve, reject });
        schedule();
      });
    },
    release(subject, lease, refund) {
      return new Promise<void>((resolve, reject) => {
        collect().releases.push({ subject, lease, refund, deadline: deadline(), settled: false, resolve, reject });
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
    scope:
      row.key_id === null
        ? undefined
        : { collections: (row.key_collections as string[] | null) ?? undefined, claims: row.key_claims as Record<string, unknown> },
    allowance: row.allowance as number,
    windowSeconds: row.window_seconds as number,
    remaining: row.remaining as number,
    reset: row.reset as number,
    retryAfter: row.retry_after as number,
    now: row.now_second as number,
    charged: row.charged as number,
    concurrency: row.concurrency as number,
    lease:
      row.lease_slot === null
        ? undefined
        : // The database counts the TTL from its decision, a little before this answer: never later than this.
          { slot: row.lease_slot as number, token: String(row.lease_token), expiresAt: performance.now() + leaseTtl * 1000 },
  };
}
