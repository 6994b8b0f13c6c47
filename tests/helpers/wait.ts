// Waiting in tests and the bench: a pause, and polling until something holds (never a hand-written loop); and the
// opposite, the event loop held on purpose.
import { setTimeout as delay } from 'node:timers/promises';
import { inspect } from 'node:util';

/**
 * Holds this process's event loop for `ms`, as a long synchronous task or a paused machine would: what the sockets
 * receive meanwhile is read only afterwards, and what was written before goes on meanwhile.
 */
export function holdEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

export function sleep(ms: number): Promise<void> {
  return delay(Math.max(0, ms));
}

export interface WaitOptions<T> {
  /** Whether `check`'s value is the one waited for; default: any truthy value. */
  until?: (value: T) => boolean;
  /** How long to keep checking (default 10 s); then the wait fails. */
  timeoutMs?: number;
  /** The pause between two checks (default 50 ms). */
  intervalMs?: number;
}

/** A value for an error message: text as it is (server output, a log), anything else on one line. */
function shown(value: unknown): string {
  return typeof value === 'string' ? value : inspect(value, { depth: 4, breakLength: Infinity });
}

/**
 * Calls `check` until its value passes `until`, and returns that value. Rejects when the time is up,
 * naming `what` was awaited and the last value seen, or at once when `check` throws (a process that
 * exited, say: nothing to wait for any more).
 */
export function waitFor<T, U extends T>(
  what: string,
  check: () => T | Promise<T>,
  options: WaitOptions<T> & { until: (value: T) => value is U },
): Promise<U>;
export function waitFor<T>(what: string, check: () => T | Promise<T>, options?: WaitOptions<T>): Promise<T>;
export async function waitFor<T>(what: string, check: () => T | Promise<T>, options: WaitOptions<T> = {}): Promise<T> {
  const { until = Boolean, timeoutMs = 10_000, intervalMs = 50 } = options;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (until(value)) return value;
    if (performance.now() >= deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}; last value: ${shown(value)}`);
    await sleep(intervalMs);
  }
}
