// Prepared queries per shape: each query is written with Drizzle once per shape (what varies with a request
// but not with its values: collection, kind, filter fields and operators, sort, position present or not, page
// size), with placeholders for every value, kept in a bounded cache, and run as a named statement on the
// server, which PostgreSQL parses once per connection and may plan once (a generic plan). Rows come back as
// arrays, read by position: no Drizzle work per request (docs/operations.md, "Prepared statements").
import { is, Placeholder, sql } from 'drizzle-orm';
import type { Sql } from 'postgres';
import type { Database, StatementBudget } from '../../db/client.ts';
import type { Collection } from './registry.ts';

/** A map that keeps the `max` entries used last: a read moves its entry to the end, an insert drops the first. */
export class Lru<K, V> {
  private readonly entries = new Map<K, V>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value as K);
  }
}

/** A query of one shape: its SQL text, and the placeholder that fills each of its parameters ($1 is slots[0]). */
export interface Shape {
  readonly text: string;
  readonly slots: readonly string[];
  /**
   * Whether it runs as a named statement, parsed once per connection; past the cap on named statements it
   * runs as an unnamed one, parsed and planned on every call.
   */
  readonly named: boolean;
  /**
   * The text that also says how long the statement ran by the server's clock, in a row after its own
   * (timedText); undefined for a shape that is no plain SELECT (an EXPLAIN), which is not timed.
   */
  readonly timed: string | undefined;
}

/** Shapes built and kept per pool. */
export const SHAPE_CACHE_SIZE = 500;
/**
 * The most shapes ever named on one pool, so each of its connections holds at most this many prepared
 * statements, each holding backend memory for its plan, which bounds what a connection holds. postgres.js
 * keeps a connection's statements as long as the connection, and a client can ask for many shapes (every
 * page size, sort and filter combination), so a shape evicted from the cache keeps its name and a shape past
 * the cap runs unnamed: as fast as a query built anew, minus the building.
 */
export const NAMED_SHAPES = 500;

/** A read's rows, and how long its statement ran by the server's clock (undefined: not timed). */
interface Read {
  readonly rows: unknown[][];
  readonly ms: number | undefined;
}

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

interface PoolShapes {
  readonly built: Lru<string, Shape>;
  readonly named: Set<string>;
  /** Reads asked for and not yet sent, by shape and parameters: see runShape. */
  readonly unsent: Map<Shape, Map<string, Unsent>>;
  /** Backends this process sent a cancel to, with when (performance.now()): see send. */
  readonly cancels: Map<number, number>;
  /**
   * How long a budget's cancel takes to end its statement, from the budget's end to the error's arrival
   * (the lock check, the pg_cancel_backend round trip, PostgreSQL's next check for interrupts), in ms, a
   * moving average: cancels are sent that much before the budget ends, so that a cut-short statement runs
   * about its budget, not its budget and the cancel's lag.
   */
  cancelLagMs: number;
}

// Statements are prepared per connection, so shapes are kept per pool; a pool that is gone takes its shapes.
const pools = new WeakMap<Sql, PoolShapes>();
// Collections are told apart by identity: two registries may name different collections alike.
const collectionIds = new WeakMap<Collection, number>();
let nextCollectionId = 0;

/** A key prefix unique to the collection object, for shape keys. */
export function collectionKey(collection: Collection): number {
  let id = collectionIds.get(collection);
  if (id === undefined) {
    id = nextCollectionId++;
    collectionIds.set(collection, id);
  }
  return id;
}

/**
 * A LIMIT written into the SQL text, for Drizzle's `.limit()`, which binds a number as a parameter: with
 * `LIMIT $n` PostgreSQL prices a generic plan for a tenth of the table, finds it dearer than a plan for the
 * value, and plans every call anew. Drizzle writes an SQL object as it is (its type says number only).
 */
export function literalLimit(rows: number): number {
  if (!Number.isSafeInteger(rows) || rows < 0) throw new Error(`Not a row count: ${rows}`);
  return sql.raw(String(rows)) as unknown as number;
}

/** What a Drizzle query builder turns into: SQL text with $n parameters. */
interface Built {
  toSQL(): { sql: string; params: unknown[] };
}

function slotsOf(params: readonly unknown[], text: string): string[] {
  return params.map((param) => {
    // A value written into a shape would make the shape depend on it: every value must be a placeholder.
    if (!is(param, Placeholder)) throw new Error(`A shape's parameter is not a placeholder: ${text}`);
    return param.name;
  });
}

/**
 * The shape under `key` on this database's pool, built by `build` (a Drizzle query with placeholders) the
 * first time, or again once the cache dropped it. `key` must say everything `build` depends on.
 */
export function shapeOf(database: Database, key: string, build: () => Built): Shape {
  let pool = pools.get(database.sql);
  if (pool === undefined) {
    pool = { built: new Lru(SHAPE_CACHE_SIZE), named: new Set(), unsent: new Map(), cancels: new Map(), cancelLagMs: FIRST_CANCEL_LAG_MS };
    pools.set(database.sql, pool);
  }
  const cached = pool.built.get(key);
  if (cached !== undefined) return cached;
  const query = build().toSQL();
  const named = pool.named.has(key) || pool.named.size < NAMED_SHAPES;
  if (named) pool.named.add(key);
  const shape: Shape = { text: query.sql, slots: slotsOf(query.params, query.sql), named, timed: timedText(query.sql) };
  pool.built.set(key, shape);
  return shape;
}

/**
 * Runs a shape with its placeholders' values; rows as arrays, columns in the order the shape selects them.
 * The rows are shared and must not be changed.
 *
 * Identical reads asked for in the same turn of the event loop share one statement: a read is sent at the
 * end of the turn it was first asked for in (setImmediate), and until then the same shape with the same
 * values joins it. Requests that a limiter's decision let through together, or that arrived together, ask
 * for the same chunk together; each would otherwise have PostgreSQL read and send the same rows. Sent
 * after every request that joins it arrived, the statement sees what each of them would have seen alone
 * (docs/operations.md, "Identical reads share a statement"). On a request's own view of the database (with a
 * budget: Database.budget), the statement is timed by the server's clock and may run no longer than the
 * budget allows; its time is told to the budget.
 */
export function runShape(database: Database, shape: Shape, values: Readonly<Record<string, unknown>>): Promise<unknown[][]> {
  const params = shape.slots.map((name) => values[name]);
  const pool = pools.get(database.sql);
  const budget = database.statementTimeoutMs === undefined ? undefined : database.budget;
  // No shape was built on this pool: none of its reads can be joined.
  if (pool === undefined) return charged(send(database, shape, params, budget ? [budget] : []), budget, { by: 1 });
  const key = JSON.stringify(params);
  const reads = pool.unsent.get(shape);
  const joined = reads?.get(key);
  if (joined !== undefined) {
    if (budget !== undefined) joined.budgets.push(budget);
    joined.sharing.by += 1;
    return charged(joined.read, budget, joined.sharing);
  }
  const unsent = reads ?? new Map<string, Unsent>();
  if (reads === undefined) pool.unsent.set(shape, unsent);
  const budgets: StatementBudget[] = budget ? [budget] : [];
  const sharing = { by: 1 };
  const read = new Promise<Read>((resolve, reject) => {
    setImmediate(() => {
      unsent.delete(key);
      if (unsent.size === 0) pool.unsent.delete(shape);
      send(database, shape, params, budgets).then(resolve, reject);
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

/** A statement cancelled by its budgets, after `ms` on the server (as this process counts it). */
class Cancelled extends Error {
  readonly ms: number;
  constructor(ms: number, cause: unknown) {
    super('Cancelled by its statement budget', { cause });
    this.ms = ms;
  }
}

/**
 * A SELECT that also reads the server's clock once it has run: its rows, each with one more column (NULL),
 * then one row of NULLs whose last column is the milliseconds since the statement started
 * (statement_timestamp(), when the server took the statement). UNION ALL runs its branches in order, so the
 * clock is read after every row of the first; the second branch reads no table (`on false`: PostgreSQL does
 * not run it). No statement more, no round trip, no connection of its own: the time is the statement's own,
 * without the wait for a connection, the round trip or a turn of this process's event loop.
 */
function timedText(text: string): string | undefined {
  if (!/^select /i.test(text)) return undefined;
  const clock = '(extract(epoch from clock_timestamp() - statement_timestamp()) * 1000)::float8';
  return `select q.*, null::float8 from (${text}) as q union all select q.*, ${clock} from (select 1) as one left join (${text}) as q on false`;
}

/** Whether `error` is PostgreSQL's answer to a cancel (pg_cancel_backend or a cancel request; a statement_timeout says so otherwise). */
function cancelledByRequest(error: unknown): boolean {
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === '57014' && typeof message === 'string' && message.includes('user request');
}

/**
 * What a pool's cancels are taken to lag before any was measured: the timer fired late by an event loop busy
 * with a storm's 429s, the pg_cancel_backend round trip on a watch whose backend waits for a core among the
 * statements it cancels, and PostgreSQL's next check for interrupts: tens of milliseconds with every core of
 * a small machine busy, a few on an idle one. The first wave of a storm's statements, all cancelled at once, runs
 * past its budgets by as much; an idle machine's cancels then bring the estimate down.
 */
const FIRST_CANCEL_LAG_MS = 20;

/** How long after this process sent a cancel to a backend an unasked-for cancel there is taken for it. */
const CANCEL_RACE_MS = 1000;

function send(database: Database, shape: Shape, params: unknown[], budgets: readonly StatementBudget[], retried = false): Promise<Read> {
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
      if (await clock?.fired()) {
        const pool = pools.get(database.sql);
        if (pool !== undefined) pool.cancelLagMs = 0.8 * pool.cancelLagMs + 0.2 * clock!.lag(at);
        throw new Cancelled(clock!.elapsed(at), error);
      }
      // A cancel this process sent to another statement, which ended before it arrived, lands on the next
      // statement of that backend: this one, which nobody meant to cancel. It is sent once more.
      const pid = (query as unknown as Cancellable).state?.pid;
      const sentAt = pid === undefined ? undefined : pools.get(database.sql)?.cancels.get(pid);
      if (cancelledByRequest(error) && !retried && sentAt !== undefined && performance.now() - sentAt < CANCEL_RACE_MS) {
        return send(database, shape, params, budgets, true);
      }
      throw error;
    },
  );
}

/** What postgres.js's Query holds to cancel it: its pool's canceller, until it is used, and its backend. */
interface Cancellable {
  canceller: ((query: Cancellable) => Promise<void>) | null;
  state: { readonly pid: number } | null;
}

/**
 * Cancels a query's statement with pg_cancel_backend on the pool's watch connection, unless its backend waits
 * for a lock or runs no statement (the statement ended), which is looked at in the same statement; resolves
 * whether it was left alone for either (then nothing was sent). A
 * pg_cancel_backend is the signal a cancel request sends, without the connection a cancel request is, which
 * PostgreSQL forks a process for: a storm's wave of statements cut short at once made as many forks, on cores
 * busy with the statements themselves, and each cancel landed that much later. Where the watch cannot (the
 * server away, a role that may not signal the backend), a cancel request as Query.cancel() sends it, keeping
 * hold of its promise, which Query.cancel() drops: one that fails must not be an unhandled rejection. The
 * statement ends anyway, by the pool's statement timeout at the latest. The backend is noted with the time, so
 * that a cancel that arrives after the statement ended, and cancels the next one there, is recognised (send).
 */
function cancel(database: Database, query: Cancellable): Promise<boolean> {
  const request = () => {
    const canceller = query.canceller;
    query.canceller = null;
    canceller?.(query).catch(() => {});
  };
  const pid = query.state?.pid;
  const cancels = pools.get(database.sql)?.cancels;
  if (pid === undefined) {
    request();
    return Promise.resolve(false);
  }
  const now = performance.now();
  if (cancels !== undefined) {
    for (const [other, at] of cancels) if (now - at >= CANCEL_RACE_MS) cancels.delete(other);
    cancels.set(pid, now);
  }
  return signal(database, pid).then((answer) => {
    if (answer === 'left') {
      if (cancels?.get(pid) === now) cancels.delete(pid);
      return true;
    }
    if (answer !== 'signalled') request();
    return false;
  });
}

/**
 * What the watch connection did with a backend asked to be cancelled: signalled it, left it alone (it waits
 * for a lock, or runs no statement), or could not say in time (WATCH_ANSWER_MS).
 */
type Signalled = 'signalled' | 'left' | 'failed';

/**
 * How long the watch has to answer before a cancel request is sent instead: it answers in milliseconds, tens
 * of them on busy cores; a watch connection that stopped answering (frozen, its backend stopped) must not
 * leave a statement running to the pool's statement_timeout.
 */
const WATCH_ANSWER_MS = 500;

/** Cancels asked for in one turn of the event loop, by watch connection: sent together (signal). */
const signalling = new Map<Database['watch'], Map<number, ((answer: Signalled) => void)[]>>();

/**
 * pg_cancel_backend(pid) on the database's watch connection, unless the backend waits for a lock (a migration,
 * an operator's maintenance: not the client's doing) or runs no statement, with the other cancels asked for in the same turn of the
 * event loop in one statement: a wave of statements whose budgets end together (a storm's) is cut short at
 * once, not one round trip after another, each statement running on meanwhile. On a connection of its own: the
 * pool's may all be waiting for that very lock.
 */
function signal(database: Database, pid: number): Promise<Signalled> {
  const { watch } = database;
  let batch = signalling.get(watch);
  if (batch === undefined) {
    const pending = new Map<number, ((answer: Signalled) => void)[]>();
    batch = pending;
    signalling.set(watch, pending);
    setImmediate(() => {
      signalling.delete(watch);
      const pids = [...pending.keys()];
      let late: NodeJS.Timeout | undefined;
      const settle = (answerOf: (pid: number) => Signalled) => {
        clearTimeout(late);
        for (const [each, waiters] of pending) for (const resolve of waiters) resolve(answerOf(each));
        pending.clear();
      };
      late = setTimeout(() => settle(() => 'failed'), WATCH_ANSWER_MS);
      // A backend that is not running a statement (it ended: its answer is on its way) is not signalled either.
      watch<{ pid: number; left: boolean; signalled: boolean }[]>`
        select p.pid, coalesce(a.wait_event_type = 'Lock' or a.state <> 'active', false) as left,
          case when a.state = 'active' and a.wait_event_type is distinct from 'Lock' then pg_cancel_backend(p.pid) else false end as signalled
        from unnest(${`{${pids.join(',')}}`}::int[]) as p (pid) left join pg_stat_activity as a on a.pid = p.pid`.then(
        (rows) => {
          const answers = new Map(rows.map((row) => [row.pid, row.left ? 'left' : row.signalled ? 'signalled' : 'failed'] as const));
          settle((each) => answers.get(each) ?? 'failed');
        },
        () => settle(() => 'failed'),
      );
    });
  }
  const waiting = batch;
  return new Promise((resolve) => {
    const waiters = waiting.get(pid);
    if (waiters === undefined) waiting.set(pid, [resolve]);
    else waiters.push(resolve);
  });
}

interface BudgetClock {
  /** Whether the budget ran out and a cancel was sent, once the cancel on its way, if any, is answered. */
  fired(): Promise<boolean>;
  /** Milliseconds from when the statement was sent to PostgreSQL to `at`. */
  elapsed(at: number): number;
  /** Milliseconds from when the budget ran out to `at` (the cancel's lag, when its statement's error came back). */
  lag(at: number): number;
  stop(): void;
}

/**
 * Cancels `query` once it has run `timeoutMs` on PostgreSQL: counted from when postgres.js sends it to the
 * server (it marks the query active then), so that the wait for a connection of the pool, the service's own
 * queue, is not the client's time. A cancel when it runs out (cancel), rather than a statement_timeout set around the
 * statement, costs nothing to the statements that run within their budget. A statement waiting for a lock
 * (a migration, an operator's maintenance) is not the client's doing: the cancel's own statement looks, sends
 * none then, and the clock looks again a budget later, leaving it to the pool's statement_timeout (a 503).
 */
function budgetClock(database: Database, query: object, timeoutMs: number): BudgetClock {
  let active = false;
  let stopped = false;
  let sentAt = 0;
  let timer: NodeJS.Timeout | undefined;
  // Sent early by the cancels' lag, but never before half the budget: an ordinary chunk always fits.
  const lead = Math.min(pools.get(database.sql)?.cancelLagMs ?? 0, timeoutMs / 2);
  let fired = false;
  /** The cancel on its way: resolves once the watch answered, or a cancel request was sent. */
  let cancelling: Promise<void> | undefined;
  const clock = {
    fired: async () => {
      await cancelling;
      return fired;
    },
    elapsed: (at: number) => at - sentAt,
    lag: (at: number) => at - sentAt - timeoutMs + lead,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
  const expire = (ms: number) => {
    timer = setTimeout(() => {
      if (stopped) return;
      cancelling = cancel(database, query as Cancellable).then((left) => {
        if (!left) fired = true;
        else if (!stopped) expire(timeoutMs);
      });
    }, ms);
  };
  Object.defineProperty(query, 'active', {
    configurable: true,
    get: () => active,
    set: (value: boolean) => {
      active = value;
      if (!value || timer !== undefined) return;
      sentAt = performance.now();
      expire(timeoutMs - lead);
    },
  });
  return clock;
}

type Item = Record<string, unknown>;

/** A row of a collection's items, as arrays in the order of its fields, to an item. */
type ItemReader = (row: readonly unknown[]) => Item;

const readers = new WeakMap<Collection, ItemReader>();

/**
 * A timestamp that RFC 3339 cannot print (±infinity, BC, a year past 9999): the constraints of the demo
 * tables refuse them (docs/operations.md, "Timestamps in the tables"); a collection over a table without
 * them fails the request (a 500, logged) rather than print a wrong instant or a cursor no one can follow.
 */
class UnprintableTimestamp extends Error {
  constructor(collection: string, field: string, text: unknown) {
    super(`${collection}.${field} holds a timestamp RFC 3339 cannot print (epoch seconds ${String(text)})`);
    this.name = 'UnprintableTimestamp';
  }
}

const itemLists = new WeakMap<readonly unknown[][], Item[]>();

/**
 * The first `count` rows (from runShape, selecting the collection's fields in order) as items. Rows that
 * joined reads share are read once: their items are shared too, and must not be changed.
 */
export function itemsOf(collection: Collection, rows: readonly unknown[][], count: number): Item[] {
  const length = Math.min(rows.length, count);
  const cached = itemLists.get(rows);
  if (cached !== undefined && cached.length === length) return cached;
  const read = itemReader(collection);
  const items: Item[] = [];
  for (let at = 0; at < length; at++) items.push(read(rows[at]!));
  itemLists.set(rows, items);
  return items;
}

/**
 * Reads rows that select the collection's fields in order: each value its field's type prints (lib/pagination/values.ts:
 * timestamps from the epoch seconds epochSeconds selects, exact numbers from PostgreSQL's text), others as they come.
 */
function itemReader(collection: Collection): ItemReader {
  let reader = readers.get(collection);
  if (reader !== undefined) return reader;
  const fields = [...collection.fields.values()];
  const names = fields.map((field) => field.name);
  const printers = fields.map((field) => field.value.print);
  reader = (row) => {
    const item: Item = {};
    for (let at = 0; at < names.length; at++) {
      const value = row[at];
      const print = printers[at];
      if (print !== undefined && value !== null) {
        const printed = print(value);
        if (printed === undefined) throw new UnprintableTimestamp(collection.name, names[at]!, value);
        item[names[at]!] = printed;
      } else {
        item[names[at]!] = value;
      }
    }
    return item;
  };
  readers.set(collection, reader);
  return reader;
}
