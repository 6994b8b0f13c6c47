// Pacing of a client that asks again too soon after a 429 (docs/reference/limits.md, "Asking again too soon").
// Its next requests within a second wait a moment before their decision: a client that ignores Retry-After
// and sends as fast as it is answered then gets at most one answer a pause on each connection, not the
// instance's every turn, and the other clients' requests are not kept waiting behind its refusals. Nothing is
// decided here: every request is still decided by the limiter, and served when its decision says so.

/**
 * How long after a 429 over the allowance the client's requests are held: at most the least Retry-After (one
 * second), so that a request sent once Retry-After has passed is never held.
 */
export const HOLD_WINDOW_MS = 1000;

/** How long a held request waits before its decision, by default. */
export const DEFAULT_HOLD_MS = 50;

/**
 * Clients declined over their allowance lately, in this instance's memory only: by the identity the request
 * names before its decision (its key's hash, its token's subject or its address), each with the time until
 * which its requests are held. Bounded, since the identities are the clients' to choose: past `max`, the one
 * declined longest ago is forgotten, and with it only a pause.
 */
export class Holds {
  /** How long a held request waits, in milliseconds. */
  readonly ms: number;
  private readonly until = new Map<string, number>();
  private readonly max: number;

  constructor(ms: number, max = 10_000) {
    this.ms = ms;
    this.max = max;
  }

  /** Whether any client is held: when none is, a request need not name its identity. */
  get empty(): boolean {
    return this.until.size === 0;
  }

  /** Whether a request of `identity` is held now. */
  holds(identity: string, now = performance.now()): boolean {
    const until = this.until.get(identity);
    if (until === undefined) return false;
    if (until > now) return true;
    this.until.delete(identity);
    return false;
  }

  /** `identity` was declined over its allowance: its requests of the next second are held. */
  declined(identity: string, now = performance.now()): void {
    this.until.delete(identity);
    this.until.set(identity, now + HOLD_WINDOW_MS);
    if (this.until.size > this.max) this.until.delete(this.until.keys().next().value!);
  }

  /** `identity` was admitted, or declined otherwise: its requests are not held. */
  cleared(identity: string): void {
    this.until.delete(identity);
  }

  /** The pause of a held request. */
  pause(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, this.ms));
  }
}
