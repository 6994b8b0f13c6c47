// POST /v1/keys: issues a new API key, shown once; only its SHA-256 is stored (API.md, "Keys").
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { Db } from '../db/client.ts';
import { apiKeys } from '../db/schema.ts';
import { invalidParameter } from './errors.ts';
import { hashKey, KEY_PREFIX } from './identity.ts';

/** The tier a newly issued key starts in. */
export const NEW_KEY_TIER = 'free';
const MAX_NAME_LENGTH = 200;
const MAX_BODY_LENGTH = 4096;

/** A new key: the prefix and 32 base64url characters (192 random bits). */
export function generateKey(): string {
  return `${KEY_PREFIX}${randomBytes(24).toString('base64url')}`;
}

/** The optional body `{"name": "…"}`; an empty body is no name. */
async function readName(c: Context): Promise<string | undefined> {
  const text = await c.req.text();
  if (text.trim() === '') return undefined;
  if (text.length > MAX_BODY_LENGTH) throw invalidParameter('body', `must be at most ${MAX_BODY_LENGTH} characters`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalidParameter('body', 'must be a JSON object');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidParameter('body', 'must be a JSON object');
  for (const field of Object.keys(body)) if (field !== 'name') throw invalidParameter(field, 'is not a known field');
  const name = (body as { name?: unknown }).name;
  if (name === undefined) return undefined;
  if (typeof name !== 'string' || name.length < 1 || name.length > MAX_NAME_LENGTH || name.includes('\u0000')) {
    throw invalidParameter('name', `must be a string of 1 to ${MAX_NAME_LENGTH} characters`);
  }
  return name;
}

export function issueKeyHandler(db: Db) {
  return async function issueKey(c: Context): Promise<Response> {
    const name = await readName(c);
    const key = generateKey();
    const id = `key_${randomBytes(9).toString('base64url')}`;
    await db.insert(apiKeys).values({
      id,
      keyHash: hashKey(key),
      prefix: key.slice(0, KEY_PREFIX.length + 6),
      name: name ?? null,
      tier: NEW_KEY_TIER,
    });
    return c.json({ id, key, tier: NEW_KEY_TIER, ...(name === undefined ? {} : { name }) }, 201);
  };
}
