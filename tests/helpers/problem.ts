// For the unit tests: what a call throws, as the problem+json it would become, so one t.same checks it all.
import { ApiError, type InvalidParam } from '../../lib/http/errors.ts';

export interface Problem {
  readonly status: number;
  readonly code: string;
  readonly invalid_params: readonly InvalidParam[] | undefined;
}

/**
 * The problem `fn` throws; 'no error' when it returns, so that t.same fails on the comparison instead of
 * the whole test stopping. Anything but an ApiError is thrown on: it would be a 500.
 */
export function problemOf(fn: () => unknown): Problem | 'no error' {
  try {
    fn();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return { status: error.status, code: error.code, invalid_params: error.options.invalidParams };
  }
  return 'no error';
}

/** The problem of a 400 invalid_parameter naming one parameter. */
export function invalidParameter(name: string, reason: string): Problem {
  return { status: 400, code: 'invalid_parameter', invalid_params: [{ name, reason }] };
}

/** The problem of a 400 invalid_parameter naming several parameters for one reason. */
export function conflicting(names: readonly string[], reason: string): Problem {
  return { status: 400, code: 'invalid_parameter', invalid_params: names.map((name) => ({ name, reason })) };
}

/** The problem of a 400 invalid_cursor. */
export function invalidCursor(reason: string): Problem {
  return { status: 400, code: 'invalid_cursor', invalid_params: [{ name: 'cursor', reason }] };
}
