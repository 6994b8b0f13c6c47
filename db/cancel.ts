// Cancelling a data query's statement: pg_cancel_backend on the database's watch connection, batched per turn of
// the event loop, a cancel request where the watch cannot; and the cancels this process sent, so that one that
// lands on the backend's next statement is told apart (docs/explanation/budgets.md, "Statement budgets").
import type { Database } from './client.ts';
import { backendPid, takeCanceller } from './driver.ts';

/** How long after this process sent a cancel to a backend an unasked-for cancel there is taken for it. */
const CANCEL_RACE_MS = 1000;

/** Backends this process sent a cancel to, with when (performance.now()), by pool: see strayCancel. */
const sentCancels = new WeakMap<Database['sql'], Map<number, number>>();

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
 * that a cancel that arrives after the statement ended, and cancels the next one there, is recognised (strayCancel).
 */
export function cancelStatement(database: Database, query: object): Promise<boolean> {
  const request = () => {
    takeCanceller(query)?.().catch(() => {});
  };
  const pid = backendPid(query);
  if (pid === undefined) {
    request();
    return Promise.resolve(false);
  }
  let cancels = sentCancels.get(database.sql);
  if (cancels === undefined) {
    cancels = new Map();
    sentCancels.set(database.sql, cancels);
  }
  const sent = cancels;
  const now = performance.now();
  for (const [other, at] of sent) if (now - at >= CANCEL_RACE_MS) sent.delete(other);
  sent.set(pid, now);
  return signal(database, pid).then((answer) => {
    if (answer === 'left') {
      if (sent.get(pid) === now) sent.delete(pid);
      return true;
    }
    if (answer !== 'signalled') request();
    return false;
  });
}

/**
 * Whether `query`'s backend waits for a lock, looked at on the watch connection without signalling anything: a
 * statement that was seen waiting is looked at so until it runs, when its budget starts again (budgetClock). No
 * answer within WATCH_ANSWER_MS, or no backend, is taken for no wait, and the clock's cancel then decides.
 */
export function waitsForLock(database: Database, query: object): Promise<boolean> {
  const pid = backendPid(query);
  if (pid === undefined) return Promise.resolve(false);
  let late: NodeJS.Timeout | undefined;
  const answer = database.watch<{ waiting: boolean }[]>`
    select coalesce((select wait_event_type = 'Lock' from pg_stat_activity where pid = ${pid}), false) as waiting`.then(
    ([row]) => row?.waiting === true,
    () => false,
  );
  const timeout = new Promise<boolean>((resolve) => {
    late = setTimeout(() => resolve(false), WATCH_ANSWER_MS);
  });
  return Promise.race([answer, timeout]).finally(() => clearTimeout(late));
}

/**
 * Whether `error`, which ended `query`'s statement, is a cancel this process sent to another statement of the same
 * backend: one that ended before the cancel arrived, which then cut short the backend's next statement, this
 * one, which nobody meant to cancel.
 */
export function strayCancel(database: Database, query: object, error: unknown): boolean {
  const pid = backendPid(query);
  const sentAt = pid === undefined ? undefined : sentCancels.get(database.sql)?.get(pid);
  return cancelledByRequest(error) && sentAt !== undefined && performance.now() - sentAt < CANCEL_RACE_MS;
}

/** Whether `error` is PostgreSQL's answer to a cancel (pg_cancel_backend or a cancel request; a statement_timeout says so otherwise). */
function cancelledByRequest(error: unknown): boolean {
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === '57014' && typeof message === 'string' && message.includes('user request');
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
