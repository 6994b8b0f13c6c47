// Requests answered before the app sees them (a bad Host, what Node's parser refuses): one log line each and
// a count, like every request the app answers (lib/http/exchange.ts), with nothing of the request's own bytes.
import type { ApiError } from './errors.ts';
import type { Logger } from './logger.ts';
import type { Metrics } from './metrics.ts';

/**
 * Records one refused request: the problem it was answered with, the request id that answer carries, and
 * its method when the request line could be read.
 */
export type Refused = (problem: ApiError, requestId: string, method?: string) => void;

/** What a refusal's `reason` may be, by the part of the request its problem names (lib/http/client-error.ts). */
const REASONS: Record<string, string> = {
  Host: 'host',
  url: 'url',
  method: 'method',
  version: 'version',
  'request line': 'request_line',
  header: 'header',
  'Content-Length': 'content_length',
  'Transfer-Encoding': 'transfer_encoding',
  body: 'body',
};

/** Why a request was refused, from a fixed set: a metric label, and safe to log whatever the request held. */
function refusalReason(problem: ApiError): string {
  if (problem.code === 'headers_too_large') return 'headers_too_large';
  if (problem.code === 'request_timeout') return 'timeout';
  return REASONS[problem.options.invalidParams?.[0]?.name ?? ''] ?? 'other';
}

export function refusals(logger: Logger, metrics: Metrics | undefined): Refused {
  return function refused(problem, requestId, method) {
    const reason = refusalReason(problem);
    metrics?.refused(reason, method, problem.status);
    // Neither the method nor the path as sent: they may be what was wrong, and anything at all.
    logger.info({ reqId: requestId, status: problem.status, code: problem.code, reason, outcome: 'refused' }, `Refused: ${reason}`);
  };
}
