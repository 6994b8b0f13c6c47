// A request's budget of PostgreSQL time and the settlement of its charge at what its statements really
// took (docs/explanation/budgets.md, "Statement budgets", "Debts").
import type { StatementBudget } from '../../db/client.ts';
import { ApiError } from '../http/errors.ts';
import type { Decision } from './limiter.ts';

/**
 * Milliseconds of PostgreSQL time a unit pays for before a request is charged more. The cost rule prices a
 * unit at about a millisecond, a little over it along some indexes (docs/benchmarks.md, "What a unit
 * buys"): at 2 ms, a chunk that runs as priced is never charged more, and a plan the estimate got wrong
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
 * The part of what a client has left that its requests' budgets share out: a statement cut short at its
 * budget runs on until PostgreSQL notices the cancel, which on a machine whose cores are all busy (a storm's
 * statements waiting for them) takes tens of milliseconds, a large part of a free key's share. That time is
 * charged as a debt; keeping a third back for it keeps most of it within the window.
 */
const SHARED = 2 / 3;

/**
 * The time a request's statements may take, at MS_PER_UNIT: its share (SHARED) of what its client had before it was
 * charged, less what its requests in flight on this instance may still be charged for their time, shared
 * among the requests the tier lets it have in flight besides those (so that all of them together stay within
 * it); or the units it was charged where they are more; never less than FLOOR_MS. Each statement is told what
 * the request has not used yet (statements run in parallel may each use it: what they overrun is a debt).
 */
export class RequestBudget implements StatementBudget {
  /** Milliseconds the request's statements used, by the server's clock: what it is charged for. */
  usedMs = 0;
  /**
   * The request's share of usedMs: a statement that n requests shared (docs/explanation/queries.md, "Identical reads
   * share a statement") counts 1/n of its time here, so that these shares add up to what PostgreSQL ran.
   */
  shareMs = 0;
  /** The request's answer once a statement was cancelled by this budget. */
  cancelled: ApiError | undefined;
  private readonly totalMs: number;
  private readonly units: number;
  /** Its share of what its client had, before the part kept back (SHARED). */
  private readonly claimedUnits: number;
  /** What its client had, less what its other requests in flight may still be charged. */
  private readonly unclaimedUnits: number;

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
    this.unclaimedUnits = remaining + units - claimed;
    const share = Math.max(0, this.unclaimedUnits) / Math.max(1, concurrency - count);
    this.units = units;
    this.claimedUnits = Math.max(units, share);
    this.totalMs = Math.max(FLOOR_MS, Math.max(units, share * SHARED) * MS_PER_UNIT);
  }

  /** Whether what its client had, less what its other requests in flight may still be charged, pays for the floor. */
  coversFloor(): boolean {
    return this.unclaimedUnits >= FLOOR_MS / MS_PER_UNIT;
  }

  /**
   * Units its statements may still be charged beyond what the request was charged up front: its whole share,
   * the part kept back for the cancel's lag included, so that no other request shares that part out again.
   */
  unsettledUnits(): number {
    return Math.max(0, Math.max(this.claimedUnits, this.totalMs / MS_PER_UNIT) - this.units);
  }

  timeoutMs(): number {
    return Math.max(FLOOR_MS, this.totalMs - this.usedMs);
  }

  used(ms: number, sharedBy = 1): void {
    this.usedMs += ms;
    this.shareMs += ms / sharedBy;
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

/** A subject's requests in flight on this instance, and what those that ended were charged beyond their price. */
interface Flight {
  readonly budgets: Set<RequestBudget>;
  /**
   * Units charged beyond their price (less what was given back) by its requests that ended, the latest last:
   * the sequence number of each end (Flights.ended) and the units, some of the latest only (ENDS_KEPT).
   */
  readonly ends: [number, number][];
  /** performance.now() of the last of `ends`. */
  lastEndAt: number;
  /** Requests waiting for one of these to end (Flights.admit). */
  waiting: number;
  /** Called once the next request in flight ends. */
  wakers: (() => void)[];
}

/** The ends with a charge beyond their price a flight keeps: a request is declined or let run within a few of them. */
const ENDS_KEPT = 64;

/**
 * How long a subject's ends with a charge beyond their price are kept once none of its requests is in flight:
 * longer than a decision takes, so that a request whose decision was asked for before they ended sees them.
 */
const ENDS_KEPT_MS = 5000;

/** Every how many decisions the flights with nothing in flight and only old ends are forgotten. */
const SWEEP_EVERY = 1024;

/**
 * The requests in flight on this instance, by subject, and their statement budgets (docs/explanation/budgets.md,
 * "Statement budgets"). What those requests may still be charged for their time is not in the limiter's
 * `remaining` until they end, so a request admitted meanwhile does not share it out again; and a request runs
 * only when what its client has left, less what its requests in flight may still be charged, covers its own
 * floor, or when it is its client's only one: otherwise it waits for one of them to end, whose charge may
 * leave nothing. The floor is time a client may not have paid for: requests let in at it together (a storm's,
 * as each wave of its statements is cut short) would otherwise overrun what their client had left by as many
 * floors; an ordinary client near the end of its allowance waits the few milliseconds a chunk takes.
 * Requests in flight are this process's own; nothing of the limit lives here.
 */
export class Flights {
  private readonly bySubject = new Map<string, Flight>();
  /** How many requests ended on this instance: a mark of when a decision was asked for. */
  private ended = 0;
  private marks = 0;

  /**
   * Taken as a request's decision is asked for: the requests that end from then on have their releases sent
   * after the decision, so what they are charged is not in its `remaining` (what those that ended before were
   * charged is taken to be in it).
   */
  mark(): number {
    this.marks += 1;
    if (this.marks % SWEEP_EVERY === 0) {
      for (const [subject, flight] of this.bySubject) this.forget(subject, flight);
    }
    return this.ended;
  }

  /**
   * The budget of a request admitted with `units` charged and `remaining` left by its decision, asked for at
   * `mark`, once it may run; or, when the requests of its client that ended since were charged more than it
   * had left, the units they were charged beyond their price: it owes more than its decision saw, and is
   * declined as the limiter would decline it now.
   */
  admit(
    subject: string,
    mark: number,
    units: number,
    remaining: number,
    concurrency: number,
  ): RequestBudget | number | Promise<RequestBudget | number> {
    let flight = this.bySubject.get(subject);
    if (flight === undefined) {
      flight = { budgets: new Set(), ends: [], lastEndAt: 0, waiting: 0, wakers: [] };
      this.bySubject.set(subject, flight);
    }
    // Answered at once, without a turn of the event loop, unless it has to wait for one of its client's requests to end.
    const now = this.tryAdmit(flight, mark, units, remaining, concurrency);
    if (now !== undefined) {
      this.forget(subject, flight);
      return now;
    }
    return this.waitToAdmit(subject, flight, mark, units, remaining, concurrency);
  }

  /** The budget, or the units owed, when the request may be answered now; undefined when it must wait. */
  private tryAdmit(
    flight: Flight,
    mark: number,
    units: number,
    remaining: number,
    concurrency: number,
  ): RequestBudget | number | undefined {
    let since = 0;
    for (let i = flight.ends.length - 1; i >= 0 && flight.ends[i]![0] > mark; i--) since += flight.ends[i]![1];
    const left = remaining - since;
    if (left < 0) return since;
    const budget = new RequestBudget(units, left, concurrency, flight.budgets);
    if (flight.budgets.size === 0 || budget.coversFloor()) {
      flight.budgets.add(budget);
      return budget;
    }
    return undefined;
  }

  private async waitToAdmit(
    subject: string,
    flight: Flight,
    mark: number,
    units: number,
    remaining: number,
    concurrency: number,
  ): Promise<RequestBudget | number> {
    flight.waiting += 1;
    try {
      for (;;) {
        await new Promise<void>((resolve) => flight.wakers.push(resolve));
        const now = this.tryAdmit(flight, mark, units, remaining, concurrency);
        if (now !== undefined) return now;
      }
    } finally {
      flight.waiting -= 1;
      this.forget(subject, flight);
    }
  }

  /** A request admitted with `budget` ended, charged `extra` units beyond what its decision charged (negative: given back). */
  end(subject: string, budget: RequestBudget, extra: number): void {
    this.ended += 1;
    const flight = this.bySubject.get(subject);
    if (flight === undefined || !flight.budgets.delete(budget)) return;
    if (extra !== 0) {
      flight.ends.push([this.ended, extra]);
      flight.lastEndAt = performance.now();
      if (flight.ends.length > ENDS_KEPT) flight.ends.shift();
    }
    const wakers = flight.wakers;
    flight.wakers = [];
    for (const wake of wakers) wake();
    this.forget(subject, flight);
  }

  /** Forgets a subject with nothing in flight, unless its requests ended with a charge beyond their price just now. */
  private forget(subject: string, flight: Flight): void {
    if (flight.budgets.size > 0 || flight.waiting > 0) return;
    if (flight.ends.length === 0 || performance.now() - flight.lastEndAt > ENDS_KEPT_MS) this.bySubject.delete(subject);
  }
}
