// Hono middleware in front of /v1: identify the client, charge the allowance, hold a concurrency lease.
import type { Context, MiddlewareHandler } from 'hono';
import type { LimiterDatabase } from '../../db/client.ts';
import { matchesAny } from '../http/conditional.ts';
import { ApiError, isDatabaseUnavailable } from '../http/errors.ts';
import { socketAddress, type TrustProxy } from '../http/forwarding.ts';
import type { Metrics } from '../http/metrics.ts';
import type { RequestRecord } from '../http/observe.ts';
import { addResponseHeaders } from '../http/response-headers.ts';
import { rateLimitHeaders } from './headers.ts';
import { clientSubject, parseAuthorization } from './identity.ts';
import type { Decision } from './limiter.ts';
import { housekeepers, shardedLimiter } from './shards.ts';

/**
 * What a request costs, as its caller prices it (as express-rate-limit takes `limit` from its caller): the
 * limiter knows nothing of what a request reads.
 */
export interface Charge {
  readonly units: number;
  /** Of `units`, those that pay for sending the answer's body: a 304 gives them back. */
  readonly sending: number;
  /** Once answered: the units it costs more than charged (negative: fewer), such as a count settled at its rows. */
  readonly settle?: () => number;
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
};

/**
 * What the release of an admitted request gives back (negative: charges more), of what its decision charged:
 * a 304's sending units, none to a `*`; and the difference between the count's price and its rows.
 */
function refundOf(c: Context, charge: Charge, charged: number, bucketExpiry: number) {
  const notModified = c.res.status === 304 && !matchesAny(c.req.header('if-none-match'));
  const units = Math.min((notModified ? charge.sending : 0) - (charge.settle?.() ?? 0), charged);
  return units !== 0 ? { units, bucketExpiry } : undefined;
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
    if (decision.outcome === 'invalid_key') {
      throw new ApiError('invalid_api_key', 'Invalid API key: unknown, revoked or malformed', { headers });
    }

    // Every answer carries them (lib/http/response-headers.ts): a chunk writes them in as it is made.
    addResponseHeaders(c, headers);
    try {
      await next();
    } finally {
      if (decision.lease !== undefined) {
        // Released before the response leaves, so a client's next request never meets its own lease. A
        // release that fails is kept by the limiter and sent again once the database answers. A 503 (the
        // database failed this request) does not wait for it: its client waits for Retry-After anyway,
        // and a connection that stopped answering would hold the answer up to the timeout. A 304 sends no
        // items: the units that paid for sending them go back with the release, and its headers report the
        // allowance with them back; those that paid for reading, skipping and counting rows stay charged, since
        // the 304 read them all the same. A 304 to `If-None-Match: *` gives nothing back: it proves nothing the
        // client had, and would make any chunk free (docs/rate-limit.md, "Conditional requests").
        // A count settles at the rows it read: what the estimate overcharged goes back with the release, and
        // what it undercharged is charged with it, so that the client's next request sees it.
        const refund = refundOf(c, charge, decision.charged, decision.reset);
        if (refund !== undefined && c.res.status !== 503) {
          const refunded = rateLimitHeaders({ ...decision, remaining: Math.max(0, decision.remaining + refund.units) });
          // A 304 is made anew (lib/http/conditional.ts) with the headers of the chunk it stands for.
          const target = c.res.headers;
          for (const name in refunded) target.set(name, refunded[name]!);
        }
        const released = limiter.release(decision.subject, decision.lease, refund).catch((error: unknown) => {
          if (!(error instanceof ApiError) && !isDatabaseUnavailable(error)) log(error);
        });
        if (c.res.status !== 503) await released;
      }
    }
  };
}
