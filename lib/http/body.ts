// Request bodies: a size limit that stops reading, and JSON checked against a valibot schema.

import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import * as v from 'valibot';
import { ApiError, type InvalidParam, invalidParameter } from './errors.ts';
import { hasControlCharacter } from './text.ts';

/** Every body the service takes is a small JSON object (a key's name, a tier): 4 KiB is plenty. */
const MAX_BODY_BYTES = 4096;

/**
 * Refuses a body larger than `maxBytes` with a 413: at once when Content-Length says so, otherwise
 * (chunked) as soon as the bytes read pass the limit, holding at most `maxBytes` (hono/body-limit).
 * Nothing past the limit is kept: @hono/node-server discards what the client still sends and closes
 * the connection shortly after the answer.
 */
export function limitBody(maxBytes: number = MAX_BODY_BYTES): MiddlewareHandler {
  const reason = `must be at most ${maxBytes} bytes`;
  return bodyLimit({
    maxSize: maxBytes,
    onError() {
      throw new ApiError('payload_too_large', `The request body ${reason}`, {
        invalidParams: [{ name: 'body', reason }],
      });
    },
  });
}

/** A valibot issue as a named parameter: the field's path, or `body` for the body as a whole. */
function invalidParamOf(issue: v.BaseIssue<unknown>): InvalidParam {
  const name = v.getDotPath(issue);
  if (name === null || name === '') return { name: 'body', reason: 'must be a JSON object' };
  // strictObject reports a key it does not know as expecting "never", a missing one as expecting its name.
  if (issue.expected === 'never') return { name, reason: 'is not a known field' };
  if (issue.kind === 'schema' && issue.input === undefined && issue.expected === `"${name}"`) return { name, reason: 'is required' };
  return { name, reason: issue.message };
}

/** Own keys of `input` that a strict object schema does not name (valibot reports only the first). */
function unknownKeys(schema: v.GenericSchema, input: unknown): InvalidParam[] {
  if (schema.type !== 'strict_object' || typeof input !== 'object' || input === null) return [];
  const entries = (schema as unknown as v.StrictObjectSchema<v.ObjectEntries, undefined>).entries;
  return Object.keys(input)
    .filter((key) => !Object.hasOwn(entries, key))
    .map((name) => ({ name, reason: 'is not a known field' }));
}

/** Checks a value (a parsed body, path parameters) against a schema; anything refused is a 400. */
export function validate<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  const unknown = unknownKeys(schema, input);
  const named = result.issues.map(invalidParamOf).filter((p) => !unknown.some((u) => u.name === p.name));
  const params = [...named, ...unknown];
  throw new ApiError('invalid_parameter', params.map((p) => `${p.name} ${p.reason}`).join('; '), { invalidParams: params });
}

/**
 * The body as JSON, checked against `schema`. A body of only whitespace is `empty` (absent when the
 * route has no use for one: then it must be JSON like any other).
 */
export async function readJson<S extends v.GenericSchema>(c: Context, schema: S, empty?: v.InferOutput<S>): Promise<v.InferOutput<S>> {
  const text = await c.req.text();
  if (empty !== undefined && text.trim() === '') return empty;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalidParameter('body', 'must be a JSON object');
  }
  // valibot takes an array for an object with keys "0", "1", …: refuse it as a whole.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidParameter('body', 'must be a JSON object');
  return validate(schema, body);
}

/** A string without NUL (PostgreSQL text cannot hold one) or other control characters. */
export function printable(message: string) {
  return v.check((text: string) => !hasControlCharacter(text), message);
}
