// The record of every request, from the middleware that wraps every route: one log line and the request metrics.
import type { Context, MiddlewareHandler } from 'hono';
import type { Logger } from './logger.ts';
import type { Metrics, UnavailableCause } from './metrics.ts';
import { requestIdOf } from './request-id.ts';
import { ROUTES } from './routes.ts';

declare module 'hono' {
  interface ContextVariableMap {
    /** Set by the rate limiter: the units this request is charged. */
    cost: number;
    /**
     * Set by the rate limiter once it settled an admitted request: the units it was charged in the end, and the
     * milliseconds its statements ran on PostgreSQL by the server's clock (undefined: none was timed), and its
     * share of them where it shared a statement with other requests (undefined: it shared none).
     */
    settled: { readonly charged: number; readonly pgMs: number | undefined; readonly pgShareMs?: number };
    /** Set by the rate limiter: what its decision on this request puts on the request's line. */
    limited: RequestRecord;
    /** Set by the one error handler: an error answered 500, logged once, with this request's line. */
    error: unknown;
  }
}

/** What a rate limiter's decision puts on a request's line (docs/operations.md, "Logs"). */
export interface RequestRecord {
  readonly tier: string;
  readonly subject: string;
  /** As the log names it; a 503 is `unavailable` whatever came before. */
  readonly outcome: string;
}

export interface ObserveOptions {
  readonly logger: Logger;
  /** Absent: nothing is counted (no ADMIN_TOKEN, so no /metrics to read it). */
  readonly metrics?: Metrics;
  /** Whether a stop signal came and /readyz fails on purpose. */
  readonly draining: () => boolean;
}

function causeOf(c: Context, limited: RequestRecord | undefined, draining: boolean): UnavailableCause {
  if (c.req.path === ROUTES.ready) return draining ? 'draining' : 'readiness';
  return limited === undefined ? 'limiter' : 'query';
}

export function observe(options: ObserveOptions): MiddlewareHandler {
  const { logger, metrics, draining } = options;
  // Resolved once: at a level above info, a request that ends well costs no line and no object.
  const logRequests = logger.isLevelEnabled('info');
  return async function observeRequest(c, next) {
    const started = performance.now();
    await next();
    const ms = performance.now() - started;
    const status = c.res.status;
    const limited = c.get('limited');
    const settled = c.get('settled');
    if (metrics !== undefined) {
      metrics.request(c.req.routePath, c.req.method, status, ms / 1000);
      if (status === 503) metrics.unavailable(causeOf(c, limited, draining()));
    }
    const error = c.get('error');
    if (error === undefined && !logRequests) return;
    // Only the path: a query string may carry filter values, and a key never travels outside its header.
    const line = {
      // Set by the request id middleware, which runs inside this one (lib/http/request-id.ts).
      reqId: c.get('requestId') ?? requestIdOf(undefined),
      method: c.req.method,
      path: c.req.path,
      status,
      durationMs: Math.round(ms * 100) / 100,
      cost: c.get('cost'),
      charged: settled?.charged,
      pgMs: settled?.pgMs,
      pgShareMs: settled?.pgShareMs,
      tier: limited?.tier,
      outcome: status === 503 ? 'unavailable' : (limited?.outcome ?? 'served'),
      subject: limited?.subject,
    };
    if (error === undefined) logger.info(line);
    else logger.error({ ...line, err: error }, 'Internal error');
  };
}
