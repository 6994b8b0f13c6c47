// POST /v1/keys: issues a new API key, shown once; only its SHA-256 is stored (docs/reference/api.md, "Keys"; docs/reference/limits.md, "Keys and hashing").
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import * as v from 'valibot';
import { apiKeys } from '../../db/schema.ts';
import { printable, readJson } from '../http/body.ts';
import { hashKey, KEY_PREFIX } from './identity.ts';
import type { KeyStore } from './key-store.ts';

/** The tier a newly issued key starts in. */
export const NEW_KEY_TIER = 'free';
const MAX_NAME_LENGTH = 200;

const nameReason = `must be a string of 1 to ${MAX_NAME_LENGTH} characters without control characters`;
/** The optional body `{"name": "…"}`; an empty body is no name (the OpenAPI document shows it as JSON Schema). */
export const issueBody = v.strictObject({
  name: v.optional(
    v.pipe(v.string(nameReason), v.minLength(1, nameReason), v.maxLength(MAX_NAME_LENGTH, nameReason), printable(nameReason)),
  ),
});

/** A new key: the prefix and 32 base64url characters (192 random bits). */
export function generateKey(): string {
  return `${KEY_PREFIX}${randomBytes(24).toString('base64url')}`;
}

/** Issues keys into `store`: on every limiter database, so that each decision finds the key at once. */
export function issueKeyHandler(store: KeyStore) {
  return async function issueKey(c: Context): Promise<Response> {
    const { name } = await readJson(c, issueBody, {});
    const key = generateKey();
    const id = `key_${randomBytes(9).toString('base64url')}`;
    const row = { id, keyHash: hashKey(key), prefix: key.slice(0, KEY_PREFIX.length + 6), name: name ?? null, tier: NEW_KEY_TIER };
    await store.change(
      (db) => db.insert(apiKeys).values(row),
      () => ({ keys: [id] }),
    );
    return c.json({ id, key, tier: NEW_KEY_TIER, ...(name === undefined ? {} : { name }) }, 201);
  };
}
