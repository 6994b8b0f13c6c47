// One request and its answer as one value (`Exchange`), made by the outermost middleware: its id, peer and the
// headers every answer carries on the way in; its log line and request metrics on the way out.
import type { Context, MiddlewareHandler } from 'hono';
import type { CorsPolicy } from './cors.ts';
import { type ApiError, problemResponse } from './errors.ts';
import type { HeaderRecord } from './header-record.ts';
import { type Logger, logRequest } from './logger.ts';
import type { Metrics, UnavailableCause } from './metrics.ts';
import { ANONYMOUS, type Principal } from './principal.ts';
import { requestIdOf } from './request-id.ts';
import { ROUTES } from './routes.ts';

declare module 'hono' {
  interface ContextVariableMap {
    /**
     * The request's one value that Hono carries from the outermost middleware to the handler and the error
     * handler. Nothing else of a request travels in the context: the stages of a collection request hand
     * their values on as arguments (lib/service/collection-request.ts).
     */
    exchange: Exchange;
  }
}

/** What a request's log line says of its rate limit, filled in by the limiter (docs/reference/logs.md). */
export interface RequestRecord {
  /** The units the request was charged at its decision; undefined: not rate-limited. */
  cost: number | undefined;
  /** The units it was charged once settled, and its statements' PostgreSQL time (whole, and its share). */
  charged: number | undefined;
  pgMs: number | undefined;
  pgShareMs: number | undefined;
  /** The tier, subject and outcome of its decision (docs/reference/logs.md). */
  tier: string | undefined;
  subject: string | undefined;
  outcome: string | undefined;
  /** Who its credentials name, once the limiter looked them up (the index lists what it may read). */
  principal: Principal;
  /** How long it waited before its decision, its client declined over its allowance just before; undefined: not held. */
  heldMs: number | undefined;
}

/**
 * A request as the service records it. The rate limiter fills in what its log line says of the limit; the
 * one error handler, an error it answered 500.
 */
export class Exchange implements RequestRecord {
  readonly started = performance.now();
  /** X-Request-Id: the client's own when sane, else a fresh one (docs/reference/api.md, "Request ids"). */
  readonly id: string;
  /** The socket's peer address, for the rate limit and for trusting forwarded headers. */
  readonly peer: string | undefined;
  /** The headers every answer carries: the request id, and CORS's for the request's Origin. */
  readonly headers: HeaderRecord;
  /** Whether the answer was made with `headers` already (a chunk, a problem), so they need not be written again. */
  written = false;
  cost: number | undefined;
  charged: number | undefined;
  pgMs: number | undefined;
  pgShareMs: number | undefined;
  tier: string | undefined;
  subject: string | undefined;
  outcome: string | undefined;
  principal: Principal = ANONYMOUS;
  heldMs: number | undefined;
  /** An error answered 500, logged once, on this request's line. */
  error: unknown;
  /** Why a 503 was answered, when the handler knows better than its outcome does (a collection unavailable). */
  cause: UnavailableCause | undefined;

  constructor(id: string, peer: string | undefined, headers: HeaderRecord) {
    this.id = id;
    this.peer = peer;
    this.headers = headers;
  }

  /**
   * The request's answer to `problem`, made with the headers every answer carries, after those of an answer
   * made before the error (`before`) and before the rate limit's (`limits`).
   */
  problemAnswer(problem: ApiError, before?: Headers, limits?: HeaderRecord): Response {
    this.written = true;
    return problemResponse(problem, this.id, before, this.headers, limits);
  }
}

/** Writes `record` on an answer made without it (a handler's c.json, a preflight), in place. */
export function writeHeaders(c: Context, record: HeaderRecord): void {
  try {
    const target = c.res.headers;
    for (const name in record) name === 'vary' ? target.append(name, record[name]!) : target.set(name, record[name]!);
  } catch {
    for (const name in record) c.header(name, record[name], { append: name === 'vary' }); // immutable headers
  }
}

export interface ExchangeOptions {
  readonly logger: Logger;
  /** Absent: nothing is counted (no ADMIN_TOKEN, so no /metrics to read it). */
  readonly metrics?: Metrics | undefined;
  /** Whether a stop signal came and /readyz fails on purpose. */
  readonly draining: () => boolean;
  /** The socket's peer address: @hono/node-server's connection info, or the Deno or Bun entry's. */
  readonly remoteAddress: (c: Context) => string | undefined;
  readonly cors: CorsPolicy;
}

function causeOf(c: Context, exchange: Exchange, draining: boolean): UnavailableCause {
  if (c.req.path === ROUTES.ready) return draining ? 'draining' : 'readiness';
  if (exchange.cause !== undefined) return exchange.cause;
  return exchange.outcome === undefined ? 'limiter' : 'query';
}

/**
 * The outermost middleware: makes the request's Exchange, answers CORS preflights (before the rate limiter,
 * so they touch no database and cost nothing), writes the headers every answer carries on an answer made
 * without them, then counts the request and logs its line.
 */
export function exchanges(options: ExchangeOptions): MiddlewareHandler {
  const { logger, metrics, draining, remoteAddress, cors } = options;
  // Resolved once: at a level above info, a request that ends well costs no line and no object.
  const logRequests = logger.isLevelEnabled('info');
  return async function exchange(c, next) {
    const id = requestIdOf(c.req.header('x-request-id'));
    const preflight = c.req.method === 'OPTIONS';
    const headers = preflight ? { 'x-request-id': id } : cors.headersFor(id, c.req.header('origin'));
    const exchange = new Exchange(id, remoteAddress(c), headers);
    c.set('exchange', exchange);
    if (preflight) {
      // Hono's `cors` answers a preflight by returning its 204, rather than setting it.
      const answer = await cors.preflight(c, next);
      if (answer instanceof Response) c.res = answer;
    } else {
      await next();
    }
    if (!exchange.written) writeHeaders(c, exchange.headers);

    const ms = performance.now() - exchange.started;
    const status = c.res.status;
    if (metrics !== undefined) {
      metrics.request(c.req.routePath, c.req.method, status, ms / 1000);
      if (status === 503) metrics.unavailable(causeOf(c, exchange, draining()));
    }
    const error = exchange.error;
    if (error === undefined && !logRequests) return;
    // Only the path: a query string may carry filter values, and a key never travels outside its header.
    const line = {
      reqId: id,
      method: c.req.method,
      path: c.req.path,
      status,
      durationMs: Math.round(ms * 100) / 100,
      cost: exchange.cost,
      charged: exchange.charged,
      pgMs: exchange.pgMs,
      pgShareMs: exchange.pgShareMs,
      tier: exchange.tier,
      outcome: status === 503 ? 'unavailable' : (exchange.outcome ?? 'served'),
      subject: exchange.subject,
      heldMs: exchange.heldMs,
    };
    if (error === undefined) logRequest(logger, line);
    else logger.error({ ...line, err: error }, 'Internal error');
  };
}
