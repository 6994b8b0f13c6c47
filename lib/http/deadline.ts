// Deadlines on database work: a quick 503 instead of a hang, and a connection replaced when it stops answering.
import type { Sql } from 'postgres';
import type { OwnConnection } from '../../db/client.ts';
import { unavailable } from './errors.ts';

/**
 * `work`'s answer, unless `ms` pass first: then it rejects with what `late` gives. One promise and one timer,
 * settled by whichever comes first (every collection request pays for one). The rejection waits one turn of
 * the event loop after the timer: when the process itself was held up (a long synchronous task, a paused
 * machine), an answer that arrived meanwhile is read after the timer fires, in the same turn, and it wins.
 */
function byDeadline<T>(work: PromiseLike<T>, ms: number, late: () => unknown): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (settled) return;
          settled = true;
          reject(late());
        }),
      ms,
    );
    work.then(
      (value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** Rejects with a 503 `unavailable` when the database takes longer than `ms` (a quick answer, not a hang). */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return byDeadline(promise, ms, unavailable);
}

/**
 * `statement`, sent on `sql` (the current client of `connection`), settles by the connection's deadline:
 * past it, the connection is taken for dead and renewed, which rejects everything still on it, and this
 * rejects with an ETIMEDOUT error (a 503). One timer per statement; an answer that arrived while the
 * process was held up wins, as in withTimeout.
 */
export function answeredInTime<T>(connection: OwnConnection, sql: Sql, statement: PromiseLike<T>): Promise<T> {
  return byDeadline(statement, connection.deadlineMs, () => {
    connection.renew(sql);
    const error = new Error(`Database connection: no answer in ${connection.deadlineMs} ms; replaced`);
    return Object.assign(error, { code: 'ETIMEDOUT' });
  });
}
