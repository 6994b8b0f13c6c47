// The record of every request, from the middleware that wraps every route: one log line and the request metrics.
import { randomUUID } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import type { Decision } from '../ratelimit/limiter.ts';
import type { Logger } from './logger.ts';
import type { Metrics, UnavailableCause } from './metrics.ts';

declare module 'hono' {
  interface ContextVariableMap {
    /** The request's id: read from whoever set it first (a request-id middleware), else made by `requestId`. */
    requestId: string;
    /** Set by the rate limiter: the units this request is charged. */
    cost: number;
    /** Set by the rate limiter: its decision on this request. */
    decision: Decision;
    /** Set by the one error handler: an error answered 500, logged once, with this request's line. */
    error: unknown;
  }
}

/** The request's id, made (and kept on the context) the first time it is asked for. */
function requestId(c: Context): string {
  let id = c.get('requestId');
  if (id === undefined) {
    id = randomUUID();
    c.set('requestId', id);
  }
  return id;
}

/** The limiter's outcomes as the log names them (docs/operations.md, "Logs"); a 503 is `unavailable` whatever came before. */
const OUTCOMES: Record<Decision['outcome'], string> = {
  ok: 'served',
  rate: 'declined',
  concurrency: 'concurrency',
  invalid_key: 'invalid key',
};

export interface ObserveOptions {
  readonly logger: Logger;
  /** Absent: nothing is counted (no ADMIN_TOKEN, so no /metrics to read it). */
  readonly metrics?: Metrics;
  /** Whether a stop signal came and /readyz fails on purpose. */
  readonly draining: () => boolean;
}

function causeOf(c: Context, decision: Decision | undefined, draining: boolean): UnavailableCause {
  if (c.req.path === '/readyz') return draining ? 'draining' : 'readiness';
  return decision === undefined ? 'limiter' : 'query';
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
    const decision = c.get('decision');
    if (metrics !== undefined) {
      metrics.request(c.req.routePath, c.req.method, status, ms / 1000);
      if (status === 503) metrics.unavailable(causeOf(c, decision, draining()));
    }
    const error = c.get('error');
    if (error === undefined && !logRequests) return;
    // Only the path: a query string may carry filter values, and a key never travels outside its header.
    const line = {
      reqId: requestId(c),
      method: c.req.method,
      path: c.req.path,
      status,
      durationMs: Math.round(ms * 100) / 100,
      cost: c.get('cost'),
      tier: decision?.tier,
      outcome: status === 503 ? 'unavailable' : decision === undefined ? 'served' : OUTCOMES[decision.outcome],
      subject: decision?.subject,
    };
    if (error === undefined) logger.info(line);
    else logger.error({ ...line, err: error }, 'Internal error');
  };
}
