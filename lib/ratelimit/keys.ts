// POST /v1/keys: issues a new API key, shown once; only its SHA-256 is stored (docs/reference/api.md, "Keys"; docs/reference/limits.md, "Keys and hashing").
// POST /admin/keys issues keys the same way, with a tier, collections and claims of the operator's (admin.ts).
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Context } from 'hono';
import * as v from 'valibot';
import { apiKeys } from '../../db/schema.ts';
import { timestampText } from '../../db/timestamps.ts';
import { printable, readJson } from '../http/body.ts';
import { hashKey, KEY_PREFIX } from './identity.ts';
import type { KeyStore } from './key-store.ts';

/** The tier a newly issued key starts in. */
export const NEW_KEY_TIER = 'free';
const MAX_NAME_LENGTH = 200;

const nameReason = `must be a string of 1 to ${MAX_NAME_LENGTH} characters without control characters`;
/** A key's name, as an operator tells keys apart by it. */
export const keyName = v.pipe(
  v.string(nameReason),
  v.minLength(1, nameReason),
  v.maxLength(MAX_NAME_LENGTH, nameReason),
  printable(nameReason),
);
/** The optional body `{"name": "…"}`; an empty body is no name (the OpenAPI document shows it as JSON Schema). */
export const issueBody = v.strictObject({ name: v.optional(keyName) });

/** What a new key is made with: its tier, and what it may read (NULL collections: every one). */
interface NewKey {
  readonly name: string | undefined;
  readonly tier: string;
  readonly collections: readonly string[] | null;
  readonly claims: Readonly<Record<string, unknown>>;
}

/** A key just issued: the key itself, shown this once, and what the operator API prints of every key. */
interface IssuedKey {
  readonly id: string;
  readonly key: string;
  readonly prefix: string;
  readonly createdAt: string;
}

/** A new key: the prefix and 32 base64url characters (192 random bits). */
export function generateKey(): string {
  return `${KEY_PREFIX}${randomBytes(24).toString('base64url')}`;
}

/**
 * Issues a key into `store`: on every limiter database, so that each decision finds the key at once. The tier
 * must exist (api_keys.tier references it).
 */
export async function issueKey(store: KeyStore, fields: NewKey): Promise<IssuedKey> {
  const key = generateKey();
  const id = `key_${randomBytes(9).toString('base64url')}`;
  const prefix = key.slice(0, KEY_PREFIX.length + 6);
  const row = {
    id,
    keyHash: hashKey(key),
    prefix,
    name: fields.name ?? null,
    tier: fields.tier,
    collections: fields.collections === null ? null : [...fields.collections],
    claims: fields.claims,
  };
  const [created] = await store.change(
    (db) =>
      db
        .insert(apiKeys)
        .values(row)
        .returning({ createdAt: sql<string>`${timestampText(apiKeys.createdAt)}` }),
    () => ({ keys: [id] }),
  );
  return { id, key, prefix, createdAt: created!.createdAt };
}

/** POST /v1/keys: a key on NEW_KEY_TIER, with no claims, that reads every collection without a row rule. */
export function issueKeyHandler(store: KeyStore) {
  return async function issueKeyRoute(c: Context): Promise<Response> {
    const { name } = await readJson(c, issueBody, {});
    const { id, key } = await issueKey(store, { name, tier: NEW_KEY_TIER, collections: null, claims: {} });
    return c.json({ id, key, tier: NEW_KEY_TIER, ...(name === undefined ? {} : { name }) }, 201);
  };
}
