// A request's budget of PostgreSQL time and the settlement of its charge at what its statements really
// took (docs/rate-limit.md, "Statement budgets", "Debts").
import type { StatementBudget } from '../../db/client.ts';
import { ApiError } from '../http/errors.ts';
import type { Decision } from './limiter.ts';

/**
 * Milliseconds of PostgreSQL time a unit pays for before a request is charged more. The cost rule prices a
 * unit at about a millisecond, a little over it along some indexes (docs/rate-limit.md, "What the numbers
 * rest on"): at 2 ms, a chunk that runs as priced is never charged more, and a plan the estimate got wrong
 * pays for its time.
 */
const MS_PER_UNIT = 2;

/**
 * The least time any request's statements may run, whatever its client has left: an ordinary chunk takes
 * about a millisecond of PostgreSQL, but tens of milliseconds by the server's clock on a machine whose cores
 * are all busy (its backend waits for one), and such a chunk must not be cut short.
 */
const FLOOR_MS = 50;

/**
 * The time a request's statements may take, at MS_PER_UNIT: its share of what its client had before it was
 * charged, less what its requests in flight on this instance may still be charged for their time, shared
 * among the requests the tier lets it have in flight besides those (so that all of them together stay within
 * it); or the units it was charged where they are more; never less than FLOOR_MS. Each statement is told what
 * the request has not used yet (statements run in parallel may each use it: what they overrun is a debt).
 */
export class RequestBudget implements StatementBudget {
  /** Milliseconds the request's statements used, by the server's clock. */
  usedMs = 0;
  /** The request's answer once a statement was cancelled by this budget. */
  cancelled: ApiError | undefined;
  private readonly totalMs: number;
  private readonly units: number;

  /**
   * `units`: what the request is charged; `remaining`: what its client has left besides; `concurrency`: its tier's
   * cap; `others`: the budgets of its client's other requests in flight on this instance, whose time beyond their
   * charge is not in `remaining` yet (it is charged when they end), so is not this request's to share.
   */
  constructor(units: number, remaining: number, concurrency: number, others: Iterable<RequestBudget> = []) {
    let claimed = 0;
    let count = 0;
    for (const other of others) {
      claimed += other.unsettledUnits();
      count += 1;
    }
    const share = Math.max(0, remaining + units - claimed) / Math.max(1, concurrency - count);
    this.units = units;
    this.totalMs = Math.max(FLOOR_MS, Math.max(units, share) * MS_PER_UNIT);
  }

  /** Units its statements may still be charged beyond what the request was charged up front. */
  unsettledUnits(): number {
    return Math.max(0, this.totalMs / MS_PER_UNIT - this.units);
  }

  timeoutMs(): number {
    return Math.max(FLOOR_MS, this.totalMs - this.usedMs);
  }

  used(ms: number): void {
    this.usedMs += ms;
  }

  exceeded(): ApiError {
    this.cancelled ??= new ApiError(
      'Query_limit_exceeded',
      `The query was cancelled after ${Math.round(this.usedMs)} ms of PostgreSQL time, what this client had left to pay for`,
    );
    return this.cancelled;
  }
}

/**
 * Time a request's statements may take beyond what its price pays for before they are charged for it: a
 * fresh connection plans a shape for the first time, and on a busy machine the server's own clock counts
 * the turns its backend waits for a core (tens of milliseconds with every core busy), which must not make
 * an ordinary chunk cost more than its price. Past it, the whole time is charged.
 */
const SLACK_MS = 50;

/**
 * The units a request priced at `units` costs for its statements' time: none beyond its price while they
 * took no longer than the price pays for at MS_PER_UNIT, with SLACK_MS to spare; past that, all of their
 * time at MS_PER_UNIT (a part of a unit is not charged). A request whose budget cut a statement short is
 * charged all of its time: it ran for what its client had left, slack or not.
 */
export function timeUnits(ms: number, units: number, cutShort = false): number {
  return cutShort || ms > units * MS_PER_UNIT + SLACK_MS ? Math.floor(ms / MS_PER_UNIT) : 0;
}

/**
 * When the whole allowance is back once `extra` units were charged after a decision: what no longer fits the
 * window is carried into the next ones, a whole allowance each at most (rate_refund), so Reset moves a
 * window for each allowance carried.
 */
export function resetAfterDebt(decision: Decision, extra: number): number {
  const carried = Math.max(0, extra - Math.max(0, decision.remaining));
  return decision.reset + Math.ceil(carried / decision.allowance) * decision.windowSeconds;
}
