// Sending a shape's statement: named or unnamed as the shape says, rows as arrays; on a request's own view of the
// database (with a request's budgets: lib/ratelimit/budget.ts), timed by the server's clock and cut short when its budgets run out.
import { budgetClock } from '../../db/budget-clock.ts';
import { strayCancel } from '../../db/cancel.ts';
import type { Database, StatementBudget } from '../../db/client.ts';
import { isServerGone } from '../http/errors.ts';
import type { Shape } from './shapes.ts';

/** A read's rows, and how long its statement ran by the server's clock (undefined: not timed). */
export interface Read {
  readonly rows: unknown[][];
  readonly ms: number | undefined;
}

/** A statement cancelled by its budgets, after `ms` on the server (as this process counts it). */
export class Cancelled extends Error {
  readonly ms: number;
  constructor(ms: number, cause: unknown) {
    super('Cancelled by its statement budget', { cause });
    this.ms = ms;
  }
}

/**
 * Runs `shape` with `params` ($1 is params[0]) as one statement. With `budgets` (those of the requests that share
 * it) on a pool with a statement_timeout, it runs the shape's timed text and reads its time from the row that
 * text adds after the others (lib/pagination/shapes.ts, timedText), and it may run for the largest of the
 * budgets: cut short then, it rejects with Cancelled. A statement ended by a cancel this process meant for another
 * statement of its backend is sent once more.
 */
export function sendStatement(
  database: Database,
  shape: Shape,
  params: unknown[],
  budgets: readonly StatementBudget[],
  retried = false,
): Promise<Read> {
  // postgres.js sends a query without parameters over the simple protocol, which prepares nothing, unless told
  // `simple: false` (an option its types leave out).
  const options = { prepare: shape.named, simple: false } as { prepare: boolean };
  const poolTimeout = database.statementTimeoutMs;
  const timing = budgets.length > 0 && poolTimeout !== undefined;
  const query = database.sql.unsafe(timing && shape.timed !== undefined ? shape.timed : shape.text, params as never[], options);
  // Requests that joined the read share its statement: it may run for the largest of their budgets.
  const timeoutMs = timing ? Math.min(poolTimeout, Math.max(...budgets.map((budget) => budget.timeoutMs()))) : undefined;
  // A budget as long as the pool's statement_timeout is that timeout's to enforce: a statement that reaches it
  // is the service's failure (a 503), not what the client had left.
  const clock = timeoutMs === undefined || timeoutMs >= poolTimeout! ? undefined : budgetClock(database, query, timeoutMs);
  return (query.values() as Promise<unknown[][]>).then(
    (rows) => {
      clock?.stop();
      if (!timing || shape.timed === undefined) return { rows, ms: undefined };
      const trailer = rows.pop()!;
      return { rows, ms: Number(trailer[trailer.length - 1]) };
    },
    async (error: unknown) => {
      const at = performance.now();
      clock?.stop();
      // A cancel on its way when the error came (the watch looks for a lock and signals in one statement): its
      // answer says whether it was this process's.
      const ms = await clock?.cutShort(at);
      if (ms !== undefined) throw new Cancelled(ms, error);
      // A cancel this process sent to another statement, which ended before it arrived, lands on the next
      // statement of that backend: this one, which nobody meant to cancel. It is sent once more. So is one whose
      // server went away (a primary stopped or failed over): a read commits nothing, and the pool's next connection
      // is a fresh one, to the new primary once there is one (docs/explanation/faults.md, "A failover").
      if (!retried && (strayCancel(database, query, error) || isServerGone(error))) {
        return sendStatement(database, shape, params, budgets, true);
      }
      throw error;
    },
  );
}
