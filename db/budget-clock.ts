// A statement's budget clock: it cancels the statement once it has run its budget on PostgreSQL, a little early
// by what cancels take to land, and measures that lag per pool (docs/explanation/budgets.md, "Statement budgets").
import { cancelStatement, waitsForLock } from './cancel.ts';
import type { Database } from './client.ts';
import { whenRunning } from './driver.ts';

export interface BudgetClock {
  /**
   * Once the cancel on its way, if any, is answered: the milliseconds from when the statement was sent to
   * PostgreSQL, or last seen waiting for a lock, to `at` if its budget ran out and a cancel was sent (the cancel's lag, up to `at`, is then
   * counted in the pool's estimate); undefined otherwise.
   */
  cutShort(at: number): Promise<number | undefined>;
  stop(): void;
}

/**
 * What a pool's cancels are taken to lag before any was measured: the timer fired late by an event loop busy
 * with a storm's 429s, the pg_cancel_backend round trip on a watch whose backend waits for a core among the
 * statements it cancels, and PostgreSQL's next check for interrupts: tens of milliseconds with every core of
 * a small machine busy, a few on an idle one. The first wave of a storm's statements, all cancelled at once, runs
 * past its budgets by as much; an idle machine's cancels then bring the estimate down.
 */
const FIRST_CANCEL_LAG_MS = 20;

/**
 * How long a budget's cancel takes to end its statement, by pool, from the budget's end to the error's arrival
 * (the lock check, the pg_cancel_backend round trip, PostgreSQL's next check for interrupts), in ms, a
 * moving average: cancels are sent that much before the budget ends, so that a cut-short statement runs
 * about its budget, not its budget and the cancel's lag.
 */
const cancelLags = new WeakMap<Database['sql'], number>();

/**
 * Cancels `query` once it has run `timeoutMs` on PostgreSQL: counted from when postgres.js sends it to the
 * server (it marks the query active then), so that the wait for a connection of the pool, the service's own
 * queue, is not the client's time. A cancel when it runs out (cancelStatement), rather than a statement_timeout
 * set around the statement, costs nothing to the statements that run within their budget. A statement waiting
 * for a lock (a migration, an operator's maintenance) is not the client's doing: the cancel's own statement
 * looks, and sends none then. The clock then only looks, a budget apart, until the statement no longer waits;
 * from that look on it has its whole budget again, as its own work began somewhere in the last interval. A
 * lock that lasts is left to the pool's statement_timeout (a 503).
 */
export function budgetClock(database: Database, query: object, timeoutMs: number): BudgetClock {
  let stopped = false;
  /** Since when the statement's time is its own: sent, or last seen waiting for a lock. */
  let ownSince = 0;
  /** When the cancel was due, a timer's delay late or not, to measure the cancels' lag from. */
  let dueAt = 0;
  let timer: NodeJS.Timeout | undefined;
  // Sent early by the cancels' lag, but never before half the budget: an ordinary chunk always fits.
  const lead = Math.min(cancelLags.get(database.sql) ?? FIRST_CANCEL_LAG_MS, timeoutMs / 2);
  let fired = false;
  /** The cancel or look on its way: resolves once the watch answered, or a cancel request was sent. */
  let cancelling: Promise<void> | undefined;
  const waited = () => {
    ownSince = performance.now();
    look();
  };
  const look = () => {
    timer = setTimeout(() => {
      if (stopped) return;
      cancelling = waitsForLock(database, query).then((waiting) => {
        if (stopped) return;
        if (waiting) waited();
        else expire(timeoutMs - lead);
      });
    }, timeoutMs);
  };
  const expire = (ms: number) => {
    dueAt = performance.now() + ms;
    timer = setTimeout(() => {
      if (stopped) return;
      cancelling = cancelStatement(database, query).then((left) => {
        if (!left) fired = true;
        else if (!stopped) waited();
      });
    }, ms);
  };
  whenRunning(query, () => {
    ownSince = performance.now();
    expire(timeoutMs - lead);
  });
  return {
    cutShort: async (at: number) => {
      await cancelling;
      if (!fired) return undefined;
      const lag = at - dueAt;
      cancelLags.set(database.sql, 0.8 * (cancelLags.get(database.sql) ?? FIRST_CANCEL_LAG_MS) + 0.2 * lag);
      return at - ownSince;
    },
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
