// Opaque cursors: a versioned, HMAC-signed payload. Decoding never throws anything but a 400 invalid_cursor.
import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { invalidCursor } from '../http/errors.ts';
import { remembered } from '../http/remembered.ts';
import type { VariantName } from './registry.ts';

const VERSION = 'v1';
// Cursors carry their filters; a 100-value `in` filter must still fit (Node caps a URL at 16 KiB anyway).
export const MAX_CURSOR_LENGTH = 16384;

/** What every cursor carries; each keyset variant adds its own fields. */
export interface CursorPayload {
  /** The variant that issued it. */
  readonly v: VariantName;
  /** The collection it belongs to. */
  readonly c: string;
  readonly [field: string]: unknown;
}

// Each secret as a key object, made once: createHmac would otherwise turn the text into a key on every call. A
// process has one secret; tests make many.
const keyOf = remembered(100, (secret: string): KeyObject => createSecretKey(Buffer.from(secret, 'utf8')));

function sign(secret: string, body: string): Buffer {
  return createHmac('sha256', keyOf(secret)).update(`${VERSION}.${body}`).digest();
}

export function encodeCursor(secret: string, payload: CursorPayload): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${VERSION}.${body}.${sign(secret, body).toString('base64url')}`;
}

/** Verifies and decodes a cursor of `collection`; any defect is a 400 invalid_cursor saying why. */
export function decodeCursor(secret: string, token: string, collection: string): CursorPayload {
  if (token.length > MAX_CURSOR_LENGTH) throw invalidCursor('too long');
  const parts = token.split('.');
  if (parts.length !== 3) throw invalidCursor('malformed');
  const [version, body, signature] = parts as [string, string, string];
  if (version !== VERSION) throw invalidCursor(`unsupported version ${JSON.stringify(version.slice(0, 10))}`);
  const base64url = /^[A-Za-z0-9_-]+$/;
  if (!base64url.test(body) || !base64url.test(signature)) throw invalidCursor('malformed');
  const expected = sign(secret, body);
  const given = Buffer.from(signature, 'base64url');
  // Re-encoding must reproduce the text exactly, so no two spellings of one cursor exist.
  if (given.length !== expected.length || given.toString('base64url') !== signature || !timingSafeEqual(given, expected)) {
    throw invalidCursor('signature does not match');
  }
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor('malformed');
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw invalidCursor('malformed');
  const { v, c } = payload as Record<string, unknown>;
  if (v !== 'cursor' && v !== 'time') throw invalidCursor('malformed');
  if (c !== collection) throw invalidCursor('it belongs to another collection');
  return payload as CursorPayload;
}
