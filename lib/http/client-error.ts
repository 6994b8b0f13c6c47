// Requests Node's HTTP parser refuses before any handler runs, answered with problem+json like every other error.
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError, invalidParameter, problemBody } from './errors.ts';
import type { Refused } from './refused.ts';
import { requestIdOf } from './request-id.ts';

/** What node:http hands to `clientError`: parser errors carry llhttp's code and reason. */
interface ClientError extends Error {
  code?: string;
  reason?: string;
}

export interface ClientErrorOptions {
  /** The server's header limit, named in the 431 (node:http's default is 16 KiB). */
  maxHeaderSize: number;
  /** Records each request answered here: one log line and its count (lib/http/refused.ts). */
  refused: Refused;
}

/** Which part of the request each llhttp error is about, for `invalid_params`. */
const parts: Record<string, string> = {
  HPE_INVALID_METHOD: 'method',
  HPE_INVALID_URL: 'url',
  HPE_INVALID_VERSION: 'version',
  HPE_INVALID_CONSTANT: 'request line',
  HPE_INVALID_HEADER_TOKEN: 'header',
  HPE_CR_EXPECTED: 'header',
  HPE_LF_EXPECTED: 'header',
  HPE_INVALID_CONTENT_LENGTH: 'Content-Length',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'Content-Length',
  HPE_INVALID_TRANSFER_ENCODING: 'Transfer-Encoding',
  HPE_INVALID_CHUNK_SIZE: 'body',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'body',
};

function problemFor(error: ClientError, options: ClientErrorOptions): ApiError {
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return new ApiError('headers_too_large', `Request headers too large: at most ${options.maxHeaderSize} bytes`);
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new ApiError('request_timeout', 'Request timeout: the request did not arrive in time');
  }
  const reason = (error.reason ?? 'cannot be parsed').replace(/\.$/, '');
  return invalidParameter(parts[error.code ?? ''] ?? 'request', `is malformed: ${reason}`);
}

/** A complete HTTP/1.1 answer; the connection is closed after it, since the parser cannot go on. */
function rawResponse(problem: ApiError, id: string): string {
  const body = problemBody(problem, id);
  return [
    `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? 'Error'}`,
    'content-type: application/problem+json',
    `x-request-id: ${id}`,
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
    '',
    body,
  ].join('\r\n');
}

/**
 * The server's `clientError` listener. Like node:http's own, it writes nothing when the peer is gone
 * or a response on that connection has already begun (writing then would corrupt it), and it always
 * destroys the socket.
 */
export function clientErrorHandler(options: ClientErrorOptions) {
  return function answerClientError(error: ClientError, socket: Duplex): void {
    const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code !== 'ECONNRESET' && socket.writable && !inFlight?.headersSent) {
      const problem = problemFor(error, options);
      // A fresh request id: the request's own headers were never read.
      const id = requestIdOf(undefined);
      socket.write(rawResponse(problem, id));
      options.refused(problem, id);
    }
    socket.destroy(error);
  };
}
