// Hono middleware in front of /v1: identify the client, charge the allowance, hold a concurrency lease.
import type { Context, MiddlewareHandler } from 'hono';
import type { LimiterDatabase } from '../../db/client.ts';
import { matchesAny } from '../http/conditional.ts';
import { ApiError, isDatabaseUnavailable } from '../http/errors.ts';
import { socketAddress, type TrustProxy } from '../http/forwarding.ts';
import type { Metrics } from '../http/metrics.ts';
import type { RequestRecord } from '../http/observe.ts';
import { addResponseHeaders } from '../http/response-headers.ts';
import { Flights, type RequestBudget, resetAfterDebt, timeUnits } from './budget.ts';
import { rateLimitHeaders } from './headers.ts';
import { clientSubject, parseAuthorization } from './identity.ts';
import type { Decision } from './limiter.ts';
import { housekeepers, shardedLimiter } from './shards.ts';

/**
 * What a request costs, as its caller prices it (as express-rate-limit takes `limit` from its caller): the
 * limiter knows nothing of what a request reads.
 */
export interface Charge {
  /** What the decision charges: the price of what can be priced without the database. */
  readonly units: number;
  /** Of `units`, those that pay for sending the answer's body: a 304 gives them back. */
  readonly sending: number;
  /**
   * Once admitted, the units of the price that needed the database (a count's, from the planner's estimate),
   * which the request's client must still have: asked only for a request admitted, so that a declined one
   * costs no planner work. They are charged with the settlement.
   */
  readonly complete?: () => number | Promise<number>;
  /** Once answered: the units it costs more than `units` by what it read (a count at its rows; never fewer). */
  readonly settle?: () => number;
}

declare module 'hono' {
  interface ContextVariableMap {
    /** The admitted request's budget of PostgreSQL time: its statements are timed and bounded by it. */
    statementBudget: RequestBudget;
  }
}

/** What a request costs when its caller says nothing: 1 unit, which a 304 gives back. */
export const ONE_UNIT: Charge = { units: 1, sending: 1 };

export interface LimiterOptions {
  /** The socket's address; the default reads @hono/node-server's connection info (none under app.request). */
  readonly remoteAddress?: (c: Context) => string | undefined;
  /** Tests only: seconds added to the database clock, read at every decision. */
  readonly clockOffset?: () => number;
  /** How long a lease of a request that never ends keeps counting (default 30 s). */
  readonly leaseTtlSeconds?: number;
  /** A decision or release slower than this is a 503 (default 2500 ms): a quick answer, not a hang. */
  readonly timeoutMs?: number;
  /** How often this instance offers to do housekeeping (default 10 s); 0 turns it off. */
  readonly housekeepingMs?: number;
}

export interface LimiterDeps {
  /**
   * The limiter's databases (Database.limiters): decisions and lease releases on each one's own connection,
   * each subject on one of them (lib/ratelimit/shards.ts); housekeeping on their pools.
   */
  readonly limiters: readonly LimiterDatabase[];
  /** Which peers are our proxies, whose X-Forwarded-For counts (TRUST_PROXY). */
  readonly trustProxy: TrustProxy;
  /** What a request costs; called once per request, before its decision. Default: 1 unit. */
  readonly charge?: (c: Context) => Charge | Promise<Charge>;
  /** Whether a request draws on the `registration` tier, per address, whatever its Authorization. Default: none. */
  readonly registration?: (c: Context) => boolean;
  readonly log: (error: unknown) => void;
  /** Counts decisions, their latency and the limiter's statements; absent: nothing is counted. */
  readonly metrics?: Metrics;
}

/** The limiter's outcomes as the request log names them (docs/operations.md, "Logs"). */
const OUTCOMES: Record<Decision['outcome'], string> = {
  ok: 'served',
  rate: 'declined',
  concurrency: 'concurrency',
  invalid_key: 'invalid key',
  cost: 'over the allowance',
};

/**
 * What a served request costs in the end: its price with the count settled at the rows it read, or what its
 * statements took at the unit's rate (budget.ts) where that is more; a 304 (not to `*`) less the units that
 * paid for sending, which it did not do. Never below 0, so a settlement never gives back more than was charged.
 */
function finalCost(c: Context, charge: Charge, budget: RequestBudget | undefined): number {
  const notModified = c.res.status === 304 && !matchesAny(c.req.header('if-none-match'));
  const price = charge.units + Math.max(0, charge.settle?.() ?? 0);
  return Math.max(0, price - (notModified ? charge.sending : 0), timeUnits(budget?.usedMs ?? 0, price, budget?.cancelled !== undefined));
}

/** The answer to a request that costs more than its tier's whole allowance: it never fits a window. */
function costRefusal(cost: number, decision: Decision, headers: Record<string, string>): ApiError {
  return new ApiError(
    'Cost_exceeds_allowance',
    `This request costs ${cost} units, more than the ${decision.allowance} units per ${decision.windowSeconds} s of tier ${decision.tier}`,
    { headers },
  );
}

export function rateLimiter(deps: LimiterDeps, options: LimiterOptions = {}): MiddlewareHandler {
  const { trustProxy, log, metrics } = deps;
  const priceOf = deps.charge ?? (() => ONE_UNIT);
  const isRegistration = deps.registration ?? (() => false);
  const remoteAddress = options.remoteAddress ?? socketAddress;
  const clockOffset = options.clockOffset ?? (() => 0);
  const leaseTtl = options.leaseTtlSeconds ?? 30;
  const timeoutMs = options.timeoutMs ?? 2500;
  const limiter = shardedLimiter(deps.limiters, leaseTtl, timeoutMs, metrics?.statement);
  const offerHousekeeping = housekeepers(deps.limiters, options.housekeepingMs ?? 10_000, clockOffset);

  /** The statement budgets of the requests in flight on this instance (budget.ts). */
  const flights = new Flights();
  return async function rateLimit(c, next) {
    const registration = isRegistration(c);
    // Throws a 400 when a trusted proxy passed an X-Forwarded-For entry that is no address: nobody is
    // charged then, least of all the proxy, whose address every client behind it shares.
    const address = clientSubject(remoteAddress(c), c.req.header('x-forwarded-for'), trustProxy);
    const credential = registration ? { kind: 'none' as const } : parseAuthorization(c.req.header('authorization'));
    const priced = priceOf(c);
    const charge = priced instanceof Promise ? await priced : priced;
    const cost = charge.units;
    c.set('cost', cost); // for the request's log line
    const asked = performance.now();
    const mark = flights.mark();
    // An unreachable database, or no answer within the timeout, throws here (the limiter gives the decision
    // up: a request answered 503 is never charged later and holds no lease); the one error handler turns
    // it into a 503.
    const decision = await limiter.decide({
      // A malformed header is an invalid key: the empty hash matches no key, and the IP is charged.
      keyHash: credential.kind === 'key' ? credential.hash : credential.kind === 'malformed' ? Buffer.alloc(0) : undefined,
      ipSubject: `${registration ? 'reg' : 'ip'}:${address}`,
      ipTier: registration ? 'registration' : 'anonymous',
      cost,
      clockOffset: clockOffset(),
    });
    metrics?.decided(decision.outcome, (performance.now() - asked) / 1000);
    c.set('limited', { tier: decision.tier, subject: decision.subject, outcome: OUTCOMES[decision.outcome] } satisfies RequestRecord);
    offerHousekeeping();

    const headers = rateLimitHeaders(decision);
    if (decision.outcome === 'rate') {
      throw new ApiError(
        'Request_limit_exceeded',
        `Rate limit exceeded: ${decision.allowance} units per ${decision.windowSeconds} s; retry after ${decision.retryAfter} s`,
        { headers: { ...headers, 'retry-after': String(decision.retryAfter) } },
      );
    }
    if (decision.outcome === 'concurrency') {
      throw new ApiError('Concurrency_limit_exceeded', 'Too many requests in flight for this client', {
        headers: { ...headers, 'retry-after': '1' },
      });
    }
    if (decision.outcome === 'cost') throw costRefusal(cost, decision, headers);
    if (decision.outcome === 'invalid_key') {
      throw new ApiError('invalid_api_key', 'Invalid API key: unknown, revoked or malformed', { headers });
    }

    /** Set when the request is refused once its price is complete: what it keeps of its charge. */
    let refusedKeeping: number | undefined;
    let budget: RequestBudget | undefined;
    try {
      // The part of the price that needed the database, asked for only now that the request is admitted, so
      // that a declined one cost no planner work: refused when the client cannot pay it or it is more than a
      // whole allowance, keeping 1 unit, the planner's (docs/rate-limit.md, "Counts").
      let added = 0;
      try {
        added = charge.complete === undefined ? 0 : await charge.complete();
      } catch (error) {
        refusedKeeping = Math.min(1, decision.charged); // the estimate failed (a 503): the planner's unit
        throw error;
      }
      if (added > 0 && (cost + added > decision.allowance || added > decision.remaining)) {
        refusedKeeping = Math.min(1, decision.charged);
        const kept = { ...decision, remaining: decision.remaining + decision.charged - refusedKeeping };
        const keptHeaders = rateLimitHeaders(kept);
        if (cost + added > decision.allowance) throw costRefusal(cost + added, decision, keptHeaders);
        const retryAfter = Math.max(1, decision.reset - decision.now);
        throw new ApiError(
          'Request_limit_exceeded',
          `Rate limit exceeded: this request costs ${cost + added} units, ${kept.remaining} are left; retry after ${retryAfter} s`,
          { headers: { ...keptHeaders, 'retry-after': String(retryAfter) } },
        );
      }
      const admitted = await flights.admit(decision.subject, mark, cost + added, decision.remaining - added, decision.concurrency);
      if (typeof admitted === 'number') {
        // Its client's requests that ended while it waited were charged more than it had left: declined as the
        // limiter would decline it now, nothing charged.
        refusedKeeping = 0;
        c.set('limited', { tier: decision.tier, subject: decision.subject, outcome: OUTCOMES.rate });
        const owing = { ...decision, remaining: 0, reset: resetAfterDebt({ ...decision, remaining: decision.remaining + cost }, admitted) };
        const retryAfter = Math.max(1, owing.reset - decision.now);
        throw new ApiError(
          'Request_limit_exceeded',
          `Rate limit exceeded: ${decision.allowance} units per ${decision.windowSeconds} s, spent by this client's requests in flight; retry after ${retryAfter} s`,
          { headers: { ...rateLimitHeaders(owing), 'retry-after': String(retryAfter) } },
        );
      }
      budget = admitted;
      // Every answer carries them (lib/http/response-headers.ts): a chunk writes them in as it is made.
      addResponseHeaders(c, headers);
      c.set('statementBudget', budget);
      await next();
    } finally {
      let final = decision.charged;
      try {
        final = refusedKeeping ?? finalCost(c, charge, budget);
      } finally {
        // Whatever happens here, the requests of its client waiting for this one to end are woken.
        if (budget !== undefined) flights.end(decision.subject, budget, final - decision.charged);
      }
      if (decision.lease !== undefined) {
        // Released before the response leaves, so a client's next request never meets its own lease. A
        // release that fails is kept by the limiter and sent again once the database answers. A 503 (the
        // database failed this request) does not wait for it: its client waits for Retry-After anyway,
        // and a connection that stopped answering would hold the answer up to the timeout.
        // The release settles the charge (docs/rate-limit.md, "Cost", "Conditional requests", "Debts"): a 304
        // gives back the units that paid for sending (none to `If-None-Match: *`, which proves nothing the
        // client had); a count is charged at the rows it read; statements that took longer than the price, at
        // the unit's rate, are charged for their time; what no longer fits the window is a debt carried into
        // the next ones. The answer's headers report the allowance after it.
        const hundredths = (ms: number) => Math.round(ms * 100) / 100;
        const pgMs = budget && budget.usedMs > 0 ? hundredths(budget.usedMs) : undefined;
        const pgShareMs = pgMs !== undefined && hundredths(budget!.shareMs) !== pgMs ? hundredths(budget!.shareMs) : undefined;
        c.set('settled', { charged: final, pgMs, ...(pgShareMs === undefined ? {} : { pgShareMs }) });
        const units = decision.charged - final;
        const refund =
          units === 0
            ? undefined
            : { units, bucketExpiry: decision.reset, allowance: decision.allowance, windowSeconds: decision.windowSeconds };
        if (refusedKeeping === undefined && c.res.status !== 503) {
          const settled = { ...decision, remaining: Math.max(0, decision.remaining + units), reset: resetAfterDebt(decision, -units) };
          const target = c.res.headers;
          if (units !== 0) {
            // A 304 is made anew (lib/http/conditional.ts) with the headers of the chunk it stands for.
            const refunded = rateLimitHeaders(settled);
            for (const name in refunded) target.set(name, refunded[name]!);
          }
          // A statement cancelled by the budget: try again once the whole allowance is back.
          if (budget?.cancelled !== undefined && c.error === budget.cancelled) {
            target.set('retry-after', String(Math.max(1, settled.reset - decision.now)));
          }
        }
        const released = limiter.release(decision.subject, decision.lease, refund).catch((error: unknown) => {
          if (!(error instanceof ApiError) && !isDatabaseUnavailable(error)) log(error);
        });
        if (c.res.status !== 503) await released;
      }
    }
  };
}
