// The rate limit around one request: `admit` (identify the client, charge the allowance, take a lease, or refuse)
// and `settle` (charge what the answer cost in the end, release the lease). Every refusal is built here.
import type { LimiterDatabase } from '../../db/client.ts';
import { ApiError, isDatabaseUnavailable } from '../http/errors.ts';
import type { RequestRecord } from '../http/exchange.ts';
import type { TrustProxy } from '../http/forwarding.ts';
import type { HeaderRecord } from '../http/header-record.ts';
import type { Metrics } from '../http/metrics.ts';
import { ANONYMOUS, type Principal } from '../http/principal.ts';
import { Flights, type RequestBudget, resetAfterDebt, timeUnits } from './budget.ts';
import { rateLimitHeaders } from './headers.ts';
import { DEFAULT_HOLD_MS, Holds } from './holds.ts';
import { type Credential, clientSubject, parseAuthorization } from './identity.ts';
import type { Decision } from './limiter.ts';
import { housekeepers, shardedLimiter } from './shards.ts';
import type { TokenClient, TokenVerifier } from './tokens.ts';

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
   * Once admitted, with who the client is: the units of the price that needed the database or the client (a
   * count's, from the planner's estimate; a read over several values of a row rule), which the client must
   * still have: asked only for a request admitted, so that a declined one costs no planner work. They are
   * charged with the settlement. An ApiError thrown (the client may not read this: a 401 or 403) refuses the
   * request, which then costs 1 unit.
   */
  readonly complete?: ((principal: Principal) => number | Promise<number>) | undefined;
  /** Once answered: the units it costs more than `units` for the rows its count read (never fewer). */
  readonly settle?: ((counted: number | undefined) => number) | undefined;
}

/** What a request costs when its caller says nothing: 1 unit, which a 304 gives back. */
export const ONE_UNIT: Charge = { units: 1, sending: 1 };

/** The client as the request names it: its socket's peer, forwarded-for and credentials. */
export interface Client {
  readonly peer: string | undefined;
  readonly forwardedFor: string | undefined;
  readonly authorization: string | undefined;
  /** POST /v1/keys: drawn on the registration tier, per address, whatever its Authorization. */
  readonly registration: boolean;
}

/** A request admitted: who its client is, its decision, its charge, and its budget of PostgreSQL time. */
export interface Admission {
  readonly principal: Principal;
  readonly decision: Decision;
  readonly charge: Charge;
  readonly budget: RequestBudget;
  readonly record: RequestRecord;
}

/** How an admitted request was answered: what its settlement is made from. */
export interface Outcome {
  readonly status: number;
  /** A 304 to a tag the client had (not to `If-None-Match: *`): the units that paid for sending are given back. */
  readonly notModified: boolean;
  /** The rows its count read, when it counted. */
  readonly counted: number | undefined;
  /** The error it was answered with, if any: a statement its budget cut short asks to retry once the allowance is back. */
  readonly error: unknown;
}

export interface LimiterOptions {
  /** Tests only: seconds added to the database clock, read at every decision. */
  readonly clockOffset?: () => number;
  /** How long a lease of a request that never ends keeps counting (default 30 s). */
  readonly leaseTtlSeconds?: number;
  /** A decision or release slower than this is a 503 (default 2500 ms): a quick answer, not a hang. */
  readonly timeoutMs?: number;
  /** How often this instance offers to do housekeeping (default 10 s); 0 turns it off. */
  readonly housekeepingMs?: number;
  /**
   * How long a request waits before its decision when its client was declined over its allowance within the
   * last second (default 50 ms; holds.ts); 0 turns holds off.
   */
  readonly holdMs?: number;
}

export interface LimiterDeps {
  /**
   * The limiter's databases (Database.limiters): decisions and lease releases on each one's own connection,
   * each subject on one of them (lib/ratelimit/shards.ts); housekeeping on their pools.
   */
  readonly limiters: readonly LimiterDatabase[];
  /** Which peers are our proxies, whose X-Forwarded-For counts (TRUST_PROXY). */
  readonly trustProxy: TrustProxy;
  readonly log: (error: unknown) => void;
  /** Counts decisions, their latency and the limiter's statements; absent: nothing is counted. */
  readonly metrics?: Metrics | undefined;
  /** Verifies bearer tokens (JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL); absent: only API keys are credentials. */
  readonly tokens?: TokenVerifier | undefined;
}

/** The limiter's outcomes as the request log names them (docs/reference/logs.md). */
const OUTCOMES: Record<Decision['outcome'], string> = {
  ok: 'served',
  rate: 'declined',
  concurrency: 'concurrency',
  invalid_key: 'invalid key',
  cost: 'over the allowance',
  unknown_tier: 'unknown tier',
};

type Refusal =
  | { readonly kind: 'decided'; readonly cost: number; readonly invalidToken?: ApiError | undefined }
  | { readonly kind: 'count'; readonly cost: number; readonly kept: number }
  | { readonly kind: 'answered'; readonly error: ApiError; readonly kept: number }
  | { readonly kind: 'in flight'; readonly owed: number; readonly cost: number };

/**
 * The answer to a request refused, with the headers of the allowance it leaves: declined by its decision
 * (over the rate, the concurrency cap, an invalid key, or a cost above the tier's whole allowance); refused once
 * its count is priced (it keeps `kept` units, the planner's); or declined after waiting for its client's requests
 * in flight, which were charged more than it had left (`owed`: nothing charged).
 */
function refusal(decision: Decision, refused: Refusal): ApiError {
  const per = `${decision.allowance} units per ${decision.windowSeconds} s`;
  if (refused.kind === 'decided') {
    const headers = rateLimitHeaders(decision);
    switch (decision.outcome) {
      case 'concurrency':
        return new ApiError('Concurrency_limit_exceeded', 'Too many requests in flight for this client', {
          headers: { ...headers, 'retry-after': '1' },
        });
      case 'invalid_key':
        // A token that failed verification is decided as a key that does not exist: counted against the address.
        if (refused.invalidToken !== undefined) return new ApiError('invalid_token', refused.invalidToken.detail, { headers });
        return new ApiError('invalid_api_key', 'Invalid API key: unknown, revoked or malformed', { headers });
      case 'cost':
        return overAllowance(refused.cost, decision, headers);
      default:
        return new ApiError('Request_limit_exceeded', `Rate limit exceeded: ${per}; retry after ${decision.retryAfter} s`, {
          headers: { ...headers, 'retry-after': String(decision.retryAfter) },
        });
    }
  }
  if (refused.kind === 'count') {
    const kept = { ...decision, remaining: decision.remaining + decision.charged - refused.kept };
    const headers = rateLimitHeaders(kept);
    if (refused.cost > decision.allowance) return overAllowance(refused.cost, decision, headers);
    const retryAfter = Math.max(1, decision.reset - decision.now);
    return new ApiError(
      'Request_limit_exceeded',
      `Rate limit exceeded: this request costs ${refused.cost} units, ${kept.remaining} are left; retry after ${retryAfter} s`,
      { headers: { ...headers, 'retry-after': String(retryAfter) } },
    );
  }
  if (refused.kind === 'answered') {
    // Refused once it was known who asks (a 401 or 403 of access, a 400 of a cursor of other rows): 1 unit kept.
    const { error } = refused;
    const kept = { ...decision, remaining: decision.remaining + decision.charged - refused.kept };
    return new ApiError(error.code, error.detail, { ...error.options, headers: { ...error.options.headers, ...rateLimitHeaders(kept) } });
  }
  const owing = {
    ...decision,
    remaining: 0,
    reset: resetAfterDebt({ ...decision, remaining: decision.remaining + refused.cost }, refused.owed),
  };
  const retryAfter = Math.max(1, owing.reset - decision.now);
  return new ApiError(
    'Request_limit_exceeded',
    `Rate limit exceeded: ${per}, spent by this client's requests in flight; retry after ${retryAfter} s`,
    { headers: { ...rateLimitHeaders(owing), 'retry-after': String(retryAfter) } },
  );
}

/** The answer to a request that costs more than its tier's whole allowance: it never fits a window. */
function overAllowance(cost: number, decision: Decision, headers: Record<string, string>): ApiError {
  return new ApiError(
    'Cost_exceeds_allowance',
    `This request costs ${cost} units, more than the ${decision.allowance} units per ${decision.windowSeconds} s of tier ${decision.tier}`,
    { headers },
  );
}

const hundredths = (ms: number) => Math.round(ms * 100) / 100;

/**
 * Who a request is before its decision, as its holds know it (holds.ts): its key's hash, its token's subject,
 * or its address's subject (which a malformed credential, or a token that failed, is counted against).
 */
function holdIdentity(credential: Credential, token: TokenClient | undefined, ipSubject: string): string {
  if (token !== undefined) return token.subject;
  if (credential.kind === 'key') return `key:${credential.hash.toString('base64')}`;
  return ipSubject;
}

/** The rate limit of an app: its limiter, the requests in flight on this instance, and housekeeping. */
export class Gate {
  private readonly trustProxy: TrustProxy;
  private readonly log: (error: unknown) => void;
  private readonly metrics: Metrics | undefined;
  private readonly clockOffset: () => number;
  private readonly limiter: ReturnType<typeof shardedLimiter>;
  private readonly offerHousekeeping: () => void;
  private readonly tokens: TokenVerifier | undefined;
  /** The statement budgets of the requests in flight on this instance (budget.ts). */
  private readonly flights = new Flights();
  /** The clients declined over their allowance lately, whose requests wait before their decision; undefined: none wait. */
  private readonly holds: Holds | undefined;

  constructor(deps: LimiterDeps, options: LimiterOptions = {}) {
    this.trustProxy = deps.trustProxy;
    this.log = deps.log;
    this.metrics = deps.metrics;
    this.tokens = deps.tokens;
    this.clockOffset = options.clockOffset ?? (() => 0);
    this.limiter = shardedLimiter(deps.limiters, options.leaseTtlSeconds ?? 30, options.timeoutMs ?? 2500, deps.metrics?.statement);
    this.offerHousekeeping = housekeepers(deps.limiters, options.housekeepingMs ?? 10_000, this.clockOffset);
    const holdMs = options.holdMs ?? DEFAULT_HOLD_MS;
    this.holds = holdMs > 0 ? new Holds(holdMs) : undefined;
  }

  /**
   * Charges `charge` to the client and takes its lease: the Admission, or a refusal thrown (an ApiError with
   * its headers). An unreachable database, or no answer within the timeout, throws too (a 503): the limiter
   * gives the decision up, so that a request answered 503 is never charged later and holds no lease.
   */
  async admit(client: Client, charge: Charge, record: RequestRecord): Promise<Admission> {
    // Throws a 400 when a trusted proxy passed an X-Forwarded-For entry that is no address: nobody is
    // charged then, least of all the proxy, whose address every client behind it shares.
    const address = clientSubject(client.peer, client.forwardedFor, this.trustProxy);
    const credential = client.registration
      ? { kind: 'none' as const }
      : parseAuthorization(client.authorization, this.tokens !== undefined);
    // A token is verified before its decision, which it names the subject and tier of; one that fails is
    // decided as an invalid key (counted against the address, 1 unit). A key set that cannot be fetched is a
    // 503 thrown here: nothing decided, nothing charged.
    let token: TokenClient | undefined;
    let invalidToken: ApiError | undefined;
    if (credential.kind === 'token') {
      try {
        // A token verified before is answered at once, without a turn of the event loop.
        const verified = this.tokens!.verify(credential.token);
        token = verified instanceof Promise ? await verified : verified;
      } catch (error) {
        if (!(error instanceof ApiError) || error.code !== 'invalid_token') throw error;
        invalidToken = error;
      }
    }
    const ipSubject = `${client.registration ? 'reg' : 'ip'}:${address}`;
    const ipTier = client.registration ? 'registration' : 'anonymous';
    let cost = invalidToken === undefined ? charge.units : 1;
    // A client declined over its allowance within the last second waits a moment before its decision; who it
    // is, named only when some client is held or it is declined.
    const holds = this.holds;
    let identity: string | undefined;
    if (holds !== undefined && !holds.empty) {
      identity = holdIdentity(credential, token, ipSubject);
      if (holds.holds(identity)) {
        record.heldMs = holds.ms;
        this.metrics?.held();
        await holds.pause();
      }
    }
    const asked = performance.now();
    const mark = this.flights.mark();
    let decision = await this.limiter.decide({
      // A malformed header, or a token that failed, is an invalid key: the empty hash matches no key, and the IP is charged.
      keyHash:
        credential.kind === 'key'
          ? credential.hash
          : credential.kind === 'malformed' || invalidToken !== undefined
            ? Buffer.alloc(0)
            : undefined,
      ipSubject: token?.subject ?? ipSubject,
      ipTier: token?.tier ?? ipTier,
      cost,
      clockOffset: this.clockOffset(),
    });
    if (decision.outcome === 'unknown_tier') {
      // A verified token whose tier claim names no tier: refused as an invalid token, counted against the address.
      invalidToken = new ApiError('invalid_token', `Invalid token: its tier ${JSON.stringify(token!.tier)} does not exist`);
      cost = 1;
      decision = await this.limiter.decide({ keyHash: Buffer.alloc(0), ipSubject, ipTier, cost, clockOffset: this.clockOffset() });
    }
    record.cost = cost;
    this.metrics?.decided(decision.outcome, (performance.now() - asked) / 1000);
    record.tier = decision.tier;
    record.subject = decision.subject;
    record.outcome = OUTCOMES[decision.outcome];
    if (holds !== undefined) {
      if (decision.outcome === 'rate') holds.declined(identity ?? holdIdentity(credential, token, ipSubject));
      else if (identity !== undefined) holds.cleared(identity);
    }
    this.offerHousekeeping();
    if (decision.outcome !== 'ok') throw refusal(decision, { kind: 'decided', cost, invalidToken });
    const principal: Principal =
      token !== undefined
        ? { kind: 'token', collections: token.collections, claims: token.claims }
        : decision.scope !== undefined
          ? { kind: 'key', collections: decision.scope.collections, claims: decision.scope.claims }
          : ANONYMOUS;
    record.principal = principal;

    // What the price needed the client or the database for, asked only now that the request is admitted, so
    // that a declined one cost no planner work: refused when the client may not read what it asked for
    // (1 unit kept), or cannot pay the rest, or it is more than a whole allowance, keeping 1 unit, the
    // planner's (docs/reference/costs.md, "Counts").
    let added = 0;
    try {
      // A number is taken as it is: awaited, it would cost the request a turn of the event loop.
      const completed = charge.complete === undefined ? 0 : charge.complete(principal);
      added = typeof completed === 'number' ? completed : await completed;
    } catch (error) {
      // The estimate failed: a 503 when the database did, and then its release is not waited for.
      const status = error instanceof ApiError ? error.status : isDatabaseUnavailable(error) ? 503 : 500;
      // A refusal keeps 1 unit, like a 400; an answer the service failed keeps none.
      const kept = status >= 500 ? 0 : Math.min(1, decision.charged);
      await this.release(decision, kept, record, status);
      if (error instanceof ApiError && status < 500) throw refusal(decision, { kind: 'answered', error, kept });
      throw error;
    }
    if (added > 0 && (cost + added > decision.allowance || added > decision.remaining)) {
      const kept = Math.min(1, decision.charged);
      await this.release(decision, kept, record, 429);
      throw refusal(decision, { kind: 'count', cost: cost + added, kept });
    }
    const admitted = this.flights.admit(decision.subject, mark, cost + added, decision.remaining - added, decision.concurrency);
    const budget = admitted instanceof Promise ? await admitted : admitted;
    if (typeof budget === 'number') {
      // Its client's requests that ended while it waited were charged more than it had left: declined as the
      // limiter would decline it now, nothing charged.
      record.outcome = OUTCOMES.rate;
      await this.release(decision, 0, record, 429);
      throw refusal(decision, { kind: 'in flight', owed: budget, cost });
    }
    return { principal, decision, charge, budget, record };
  }

  /**
   * Ends an admitted request: charges what it cost in the end (docs/reference/costs.md, "The rule", "Conditional
   * requests", "Settlement": a 304 gives back the units that paid for sending, none to `If-None-Match: *`, which
   * proves nothing the client had; a count is charged at the rows it read; statements that took longer than
   * the price, at the unit's rate, are charged for their time; what no longer fits the window is a debt carried
   * into the next ones; an answer the service failed, a 500 or a 503, costs nothing), wakes its client's requests
   * waiting for it, releases its lease, and gives the rate-limit headers of its answer: the allowance after the
   * settlement.
   */
  async settle(admission: Admission, outcome: Outcome): Promise<HeaderRecord> {
    const { decision, charge, budget, record } = admission;
    let final = decision.charged;
    try {
      if (outcome.status >= 500) final = 0;
      else {
        const price = charge.units + Math.max(0, charge.settle?.(outcome.counted) ?? 0);
        const cutShort = budget.cancelled !== undefined;
        final = Math.max(0, price - (outcome.notModified ? charge.sending : 0), timeUnits(budget.usedMs, price, cutShort));
      }
    } finally {
      // Whatever happens here, the requests of its client waiting for this one to end are woken.
      this.flights.end(decision.subject, budget, final - decision.charged);
    }
    // Without a lease nothing is settled: the answer reports the allowance as decided.
    if (decision.lease === undefined) return rateLimitHeaders(decision);
    const pgMs = budget.usedMs > 0 ? hundredths(budget.usedMs) : undefined;
    const share = pgMs === undefined ? undefined : hundredths(budget.shareMs);
    record.pgMs = pgMs;
    record.pgShareMs = share !== pgMs ? share : undefined;
    await this.release(decision, final, record, outcome.status);
    const units = decision.charged - final;
    const reset = units === 0 ? decision.reset : resetAfterDebt(decision, -units);
    const headers = rateLimitHeaders(decision, Math.max(0, decision.remaining + units), reset);
    // A statement cancelled by the budget: try again once the whole allowance is back.
    if (budget.cancelled !== undefined && outcome.error === budget.cancelled) {
      headers['retry-after'] = String(Math.max(1, reset - decision.now));
    }
    return headers;
  }

  /**
   * Releases the decision's lease, charging it `final` units in the end. Released before the answer leaves,
   * so a client's next request never meets its own lease. A release that fails is kept by the limiter and sent
   * again once the database answers. A 503 (the database failed this request) does not wait for it: its client
   * waits for Retry-After anyway, and a connection that stopped answering would hold the answer up to the timeout.
   */
  private async release(decision: Decision, final: number, record: RequestRecord, status: number): Promise<void> {
    if (decision.lease === undefined) return;
    record.charged = final;
    const units = decision.charged - final;
    const refund =
      units === 0
        ? undefined
        : { units, bucketExpiry: decision.reset, allowance: decision.allowance, windowSeconds: decision.windowSeconds };
    const released = this.limiter.release(decision.subject, decision.lease, refund).catch((error: unknown) => {
      if (!(error instanceof ApiError) && !isDatabaseUnavailable(error)) this.log(error);
    });
    if (status !== 503) await released;
  }
}
