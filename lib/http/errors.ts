// One error type with a machine-readable code, and its problem+json (RFC 9457) rendering.
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { type HeaderRecord, mergeHeaders } from './header-record.ts';
import { requestIdOf } from './request-id.ts';

/** Every error code of the public contract, with its status (docs/reference/errors.md, "Error codes"). */
export const errorStatus = {
  invalid_parameter: 400,
  invalid_cursor: 400,
  invalid_api_key: 401,
  invalid_token: 401,
  unauthorized: 401,
  forbidden: 403,
  insufficient_scope: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  payload_too_large: 413,
  Request_limit_exceeded: 429,
  Concurrency_limit_exceeded: 429,
  Query_limit_exceeded: 429,
  Cost_exceeds_allowance: 403,
  headers_too_large: 431,
  unavailable: 503,
  collection_unavailable: 503,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof errorStatus;

const titles: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  413: 'Content Too Large',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/**
 * The challenge of every 401 (RFC 9110 section 11.6.1 requires one; RFC 6750 gives Bearer's): an API key
 * or the admin token, sent as `Authorization: Bearer <token>`.
 */
const challenges: Partial<Record<ErrorCode, string>> = {
  invalid_api_key: 'Bearer realm="api", error="invalid_token"',
  invalid_token: 'Bearer realm="api", error="invalid_token"',
  insufficient_scope: 'Bearer realm="api", error="insufficient_scope"',
  unauthorized: 'Bearer realm="admin"',
};

export interface InvalidParam {
  name: string;
  reason: string;
}

export interface ApiErrorOptions {
  invalidParams?: InvalidParam[];
  headers?: Record<string, string>;
}

export class ApiError extends Error {
  override name = 'ApiError';
  readonly code: ErrorCode;
  readonly detail: string;
  readonly options: ApiErrorOptions;
  readonly status: number;
  constructor(code: ErrorCode, detail: string, options: ApiErrorOptions = {}) {
    // No stack: an ApiError is an answer to a client (a 429, a 400), never a fault to trace, and capturing a
    // stack cost each declined request more than its problem body. A fault keeps its own stack (onError).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(detail);
    Error.stackTraceLimit = limit;
    this.code = code;
    this.detail = detail;
    this.options = options;
    this.status = errorStatus[code];
  }
}

/** A 400 naming one parameter: `limit must be an integer from 1 to 100`. */
export function invalidParameter(name: string, reason: string): ApiError {
  return new ApiError('invalid_parameter', `${name} ${reason}`, { invalidParams: [{ name, reason }] });
}

/** A 400 naming several parameters at once, e.g. two variants mixed in one request. */
export function conflictingParameters(names: string[], reason: string): ApiError {
  return new ApiError('invalid_parameter', `${names.join(', ')}: ${reason}`, {
    invalidParams: names.map((name) => ({ name, reason })),
  });
}

/** The 405 of a method a path does not support, with the Allow header. */
export function notAllowed(allow: string): ApiError {
  return new ApiError('method_not_allowed', `Method not allowed; this path allows ${allow}`, { headers: { allow } });
}

/** A route handler for the methods a path does not support: 405 with the Allow header. */
export function methodNotAllowed(allow: string) {
  return function notAllowedHere(): never {
    throw notAllowed(allow);
  };
}

export function invalidCursor(reason: string): ApiError {
  return new ApiError('invalid_cursor', `Invalid cursor: ${reason}`, {
    invalidParams: [{ name: 'cursor', reason }],
  });
}

/**
 * The problem+json body of an error, for the few answers written without a Response (lib/http/client-error.ts).
 * `requestId`: the request's X-Request-Id, so that a user can quote it (docs/reference/api.md, "Request ids").
 */
export function problemBody(error: ApiError, requestId: string): string {
  const body: Record<string, unknown> = {
    type: 'about:blank',
    title: titles[error.status] ?? 'Error',
    status: error.status,
    detail: error.detail,
    code: error.code,
  };
  if (error.options.invalidParams) body.invalid_params = error.options.invalidParams;
  body.requestId = requestId;
  return JSON.stringify(body);
}

/** The headers of an error's answer beyond the body's type and the request id: its own, and a 401's challenge. */
function problemHeaders(error: ApiError): Record<string, string> {
  const challenge = challenges[error.code];
  const own = error.options.headers ?? {};
  return challenge === undefined ? own : { 'www-authenticate': challenge, ...own };
}

/**
 * An error's answer. `before`: the headers of an answer made before the error; `headers`: those every answer
 * carries (request id, CORS) and the rate limit's, written last, as on any other answer. Made with a plain
 * header record, which @hono/node-server sends as it is: a Headers object would cost a 429 as much as its decision.
 */
export function problemResponse(error: ApiError, requestId: string, before?: Headers, ...headers: (HeaderRecord | undefined)[]): Response {
  const record: Record<string, string> = {};
  if (before !== undefined) for (const [name, value] of before) record[name] = value;
  record['content-type'] = 'application/problem+json';
  record['x-request-id'] = requestId;
  mergeHeaders(record, problemHeaders(error), ...headers);
  return new Response(problemBody(error, requestId), { status: error.status, headers: record });
}

/** The 503 of a database that is away or too slow: the client may try again in a second. */
export function unavailable(): ApiError {
  return new ApiError('unavailable', 'The database is unavailable', { headers: { 'retry-after': '1' } });
}

/**
 * The 503 of a collection the catalog no longer serves as the collections file says (its relation, a column, a
 * type or an index changed, a materialized view emptied): the others are served; its problem goes to the log, not to
 * the client (docs/reference/errors.md, "Error codes"). `retryAfter`: 1 while the catalog is read again after a
 * statement met the change, more while the collection stays unavailable.
 */
export function collectionUnavailable(name: string, retryAfter: number): ApiError {
  return new ApiError('collection_unavailable', `Collection ${name} is unavailable: the database no longer matches its collections file`, {
    headers: { 'retry-after': String(retryAfter) },
  });
}

/**
 * What an error is answered with: one of ours as it is, a Hono HTTP exception's 4xx, a database that is away
 * (503); anything else is a fault, handed to `log` and answered with a generic 500.
 */
export function problemOf(error: unknown, log: (error: unknown) => void): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof HTTPException && error.status < 500) {
    return new ApiError(error.status === 404 ? 'not_found' : 'invalid_parameter', error.message || 'Bad request');
  }
  if (isDatabaseUnavailable(error)) return unavailable();
  log(error);
  return new ApiError('internal_error', 'Internal error');
}

/**
 * The one error handler of the app, for every answer that is not a collection request's (which answers its
 * own errors with the rate limit's headers: lib/service/collection-request.ts).
 */
export function onError(log: (error: unknown, c: Context) => void) {
  return function handleError(error: Error, c: Context): Response {
    // An answer made before the error keeps its headers; none made, none asked for (`c.res` would make one).
    const before = c.finalized ? c.res.headers : undefined;
    const exchange = c.get('exchange');
    const problem = problemOf(error, (fault) => log(fault, c));
    if (exchange === undefined) return problemResponse(problem, requestIdOf(undefined), before);
    return exchange.problemAnswer(problem, before);
  };
}

/**
 * What a server or a connection that goes away fails a statement with: a primary stopped, crashed, demoted or
 * failed over (docs/explanation/faults.md, "A failover"). Nothing here is the statement's own fault, so a read
 * that failed so may be sent again.
 */
const goneCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN', // a host name that cannot be resolved for now (a DNS record being moved)
  'CONNECTION_CLOSED',
  // No host of the URL's list is what its target_session_attrs asks for (postgres.js with the project's patch):
  // between a primary's demotion and its standby's promotion, neither is read-write.
  'CONNECTION_UNSUITABLE',
  '25006', // read_only_sql_transaction: the primary went read-only as it is demoted, or a standby answered
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: the database system is starting up, shutting down, in recovery mode
  '08000', // connection_exception
  '08003', // connection_does_not_exist
  '08006', // connection_failure
]);

const unavailableCodes = new Set([
  ...goneCodes,
  'ETIMEDOUT',
  'CONNECT_TIMEOUT',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  '53300', // too_many_connections: the server's max_connections, or a role's or database's limit
  '57014', // query_canceled (statement_timeout)
  '40001', // on a read replica: a query cancelled for a conflict with recovery (the service runs nothing serializable)
  '08P01', // PgBouncer's own refusals: no server connection in time (query_wait_timeout), query_timeout, a server that went away
]);

/**
 * What the server refuses a statement with when its primary is going away, in its own reply to the statement: the
 * statement's transaction was rolled back, nothing of it committed, and it may be sent again (to the new primary).
 * Not 57P02: a crash's FATAL may reach a backend between a commit and its reply.
 */
const refusedCodes = new Set(['25006', '57P01', '57P03']);

/** The error's `code`, or that of an error it wraps (Drizzle's DrizzleQueryError wraps the driver's), that `codes` holds. */
function codeIn(error: unknown, codes: ReadonlySet<string>): boolean {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && codes.has(code)) return true;
  }
  return false;
}

export function isDatabaseUnavailable(error: unknown): boolean {
  return codeIn(error, unavailableCodes);
}

/** A server or connection that went away failed the statement (goneCodes): a read may be sent again, once. */
export function isServerGone(error: unknown): boolean {
  return codeIn(error, goneCodes);
}

/**
 * The server itself refused the statement as its primary went away (a read-only transaction, a shutdown, recovery),
 * in its reply: its transaction was rolled back, and it may be sent again. A PostgreSQL error carries the server's
 * severity; a connection's error (its SQLSTATE-less code) says nothing of what the server did.
 */
export function isRefusedByServer(error: unknown): boolean {
  const severity = (error as { severity?: unknown } | undefined)?.severity;
  return typeof severity === 'string' && codeIn(error, refusedCodes);
}

/** The server refused the statement as read-only: the connection is open to a server that is no primary (any more). */
export function isReadOnlyRefusal(error: unknown): boolean {
  return isRefusedByServer(error) && (error as { code?: unknown }).code === '25006';
}
