// The read coalescer: identical reads asked for in the same turn of the event loop share one statement, each
// request told its time (docs/explanation/queries.md, "Identical reads share a statement").
import type { Database, StatementBudget } from '../../db/client.ts';
import { writeWhenHanded } from '../../db/driver.ts';
import type { Shape } from './shapes.ts';
import { Cancelled, type Read, sendStatement } from './statement.ts';

/** A read asked for and not yet sent: its answer, the budgets of the requests that joined it, and how many did. */
interface Unsent {
  readonly read: Promise<Read>;
  readonly budgets: StatementBudget[];
  readonly sharing: Sharing;
}

/** The requests that share a read's statement, itself's asker included: known once the statement is sent. */
interface Sharing {
  by: number;
}

/**
 * Reads asked for and not yet sent, by pool, shape and parameters: see runShape. A shape is told apart by
 * identity, and by pool: one built on another pool is not this pool's shape of the same key.
 */
const unsentByPool = new WeakMap<Database['sql'], Map<Shape, Map<string, Unsent>>>();

/** The reads asked for in this turn of the event loop, each a function that sends it and names its pool. */
let turn: (() => Database['sql'])[] | undefined;

/**
 * Has `send` called at the end of this turn (setImmediate), with the turn's other reads, and then has each pool
 * they went to write them at once (writeWhenHanded): postgres.js would write them at its own next setImmediate,
 * in the next turn, behind whatever that turn's poll reads. All of a turn's reads are sent in one callback, so a
 * connection handed several writes them in one write.
 */
function sendAtTurnEnd(send: () => Database['sql']): void {
  if (turn !== undefined) {
    turn.push(send);
    return;
  }
  turn = [send];
  setImmediate(() => {
    const sends = turn!;
    turn = undefined;
    const pools = new Set<Database['sql']>();
    for (const sendOne of sends) pools.add(sendOne());
    for (const sql of pools) writeWhenHanded(sql);
  });
}

/** The rows of reads that more than one request shared: what is made of them once may serve each of those requests. */
const sharedRows = new WeakSet<readonly unknown[][]>();

/** Whether these rows (runShape's) were read for more than one request. */
export function readByMany(rows: readonly unknown[][]): boolean {
  return sharedRows.has(rows);
}

/**
 * Runs a shape with its placeholders' values; rows as arrays, columns in the order the shape selects them.
 * The rows are shared and must not be changed.
 *
 * Identical reads asked for in the same turn of the event loop share one statement: a read is sent at the
 * end of the turn it was first asked for in (setImmediate, sendAtTurnEnd), and until then the same shape with the same
 * values joins it. Requests that a limiter's decision let through together, or that arrived together, ask
 * for the same chunk together; each would otherwise have PostgreSQL read and send the same rows. Sent
 * after every request that joins it arrived, the statement sees what each of them would have seen alone
 * (docs/explanation/queries.md, "Identical reads share a statement"). With a request's `budget` (docs/explanation/budgets.md),
 * the statement is timed by the server's clock and may run no longer than the budget allows; its time is told
 * to the budget.
 */
export function runShape(
  database: Database,
  shape: Shape,
  values: Readonly<Record<string, unknown>>,
  requestBudget?: StatementBudget,
): Promise<unknown[][]> {
  const params = shape.slots.map((name) => values[name]);
  // Behind a transaction pooler no statement is timed or budgeted (Database.statementTimeoutMs).
  const budget = database.statementTimeoutMs === undefined ? undefined : requestBudget;
  let pool = unsentByPool.get(database.sql);
  if (pool === undefined) {
    pool = new Map();
    unsentByPool.set(database.sql, pool);
  }
  const key = JSON.stringify(params);
  const reads = pool.get(shape);
  const joined = reads?.get(key);
  if (joined !== undefined) {
    if (budget !== undefined) joined.budgets.push(budget);
    joined.sharing.by += 1;
    return charged(joined.read, budget, joined.sharing);
  }
  const unsent = reads ?? new Map<string, Unsent>();
  if (reads === undefined) pool.set(shape, unsent);
  const budgets: StatementBudget[] = budget ? [budget] : [];
  const sharing = { by: 1 };
  const shapes = pool;
  const read = new Promise<Read>((resolve, reject) => {
    sendAtTurnEnd(() => {
      unsent.delete(key);
      if (unsent.size === 0) shapes.delete(shape);
      // A throw here would leave the turn's other reads unsent, and their requests waiting for good.
      try {
        sendStatement(database, shape, params, budgets).then(resolve, reject);
      } catch (error) {
        reject(error);
      }
      return database.sql;
    });
  });
  unsent.set(key, { read, budgets, sharing });
  return charged(read, budget, sharing);
}

/**
 * A read's rows, its time told to the request's budget: each request that joined a read is told the
 * statement's whole time, what it would have cost it alone, and how many requests shared it. A statement its
 * budget cancelled answers the budget's error, once its time is told.
 */
function charged(read: Promise<Read>, budget: StatementBudget | undefined, sharing: Sharing): Promise<unknown[][]> {
  return read.then(
    (done) => {
      if (budget !== undefined && done.ms !== undefined) budget.used(done.ms, sharing.by);
      if (sharing.by > 1) sharedRows.add(done.rows);
      return done.rows;
    },
    (error: unknown) => {
      if (!(error instanceof Cancelled)) throw error;
      if (budget === undefined) throw error.cause;
      budget.used(error.ms, sharing.by);
      throw budget.exceeded();
    },
  );
}
