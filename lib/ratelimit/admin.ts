// The operator API (docs/reference/api.md, "Operator API"): tiers and keys, behind ADMIN_TOKEN.
import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import * as v from 'valibot';
import { apiKeys, rateTiers } from '../../db/schema.ts';
import { timestampText } from '../../db/timestamps.ts';
import { requireAdminToken } from '../http/bearer.ts';
import { limitBody, readJson, validate } from '../http/body.ts';
import { ApiError, invalidParameter, methodNotAllowed } from '../http/errors.ts';
import type { KeyStore } from './key-store.ts';

const TIER_NAME = /^[a-z][a-z0-9_-]{0,39}$/;
const tierNameReason = 'must be 1 to 40 of a-z, 0-9, _ and -, starting with a letter';
// Issued ids are "key_" and 12 base64url characters; anything of that alphabet may be looked up (404).
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

function integerIn(min: number, max: number) {
  const reason = `must be an integer from ${min} to ${max}`;
  return v.pipe(v.number(reason), v.integer(reason), v.minValue(min, reason), v.maxValue(max, reason));
}

// Strict objects: a field the schema does not name (`burst`, `toString`, `__proto__`) is a 400 naming it.
// Exported for the OpenAPI document, which shows them as JSON Schema.
export const tierBody = v.strictObject({
  limit: integerIn(1, 1_000_000_000),
  windowSeconds: integerIn(1, 30 * 86_400),
  concurrency: integerIn(1, 1_000_000),
});
export const keyBody = v.strictObject({
  tier: v.pipe(v.string('must be the name of a tier'), v.regex(TIER_NAME, 'must be the name of a tier')),
});
export const tierParams = v.object({ name: v.pipe(v.string(), v.regex(TIER_NAME, tierNameReason)) });
export const keyParams = v.object({ id: v.pipe(v.string(), v.regex(KEY_ID, 'must be 1 to 64 of A-Z, a-z, 0-9, _ and -')) });

// xmax = 0 only on a freshly inserted row: tells create (201) from change (200) in one statement.
const sqlCreated = sql<boolean>`(xmax = 0)`;
const sqlNow = sql`clock_timestamp()`;

const tierColumns = {
  name: rateTiers.name,
  limit: rateTiers.allowance,
  windowSeconds: rateTiers.windowSeconds,
  concurrency: rateTiers.concurrency,
};

const keyColumns = {
  id: apiKeys.id,
  prefix: apiKeys.prefix,
  name: apiKeys.name,
  tier: apiKeys.tier,
  // RFC 3339 UTC with six fractional digits, like every timestamp the API prints.
  createdAt: sql<string>`${timestampText(apiKeys.createdAt)}`,
};

/**
 * The /admin routes. Every change is a plain write to the tables that each rate-limit decision reads
 * in its one statement, so every instance applies it from its next request on; with several limiter
 * databases, written to each of them before it commits (lib/ratelimit/key-store.ts).
 */
export function adminRoutes(store: KeyStore, adminToken: string): Hono {
  const { drizzle } = store;
  const admin = new Hono();
  admin.use('*', requireAdminToken(adminToken, 'The operator API'), limitBody());

  admin.get('/tiers', async (c) => {
    const tiers = await drizzle.select(tierColumns).from(rateTiers).orderBy(asc(rateTiers.allowance), asc(rateTiers.name));
    return c.json({ tiers });
  });

  admin.put('/tiers/:name', async (c) => {
    const { name } = validate(tierParams, c.req.param());
    const tier = await readJson(c, tierBody);
    const values = { allowance: tier.limit, windowSeconds: tier.windowSeconds, concurrency: tier.concurrency };
    const [row] = await store.change(
      (db) =>
        db
          .insert(rateTiers)
          .values({ name, ...values })
          .onConflictDoUpdate({ target: rateTiers.name, set: values })
          .returning({ created: sqlCreated }),
      () => ({ tiers: [name] }),
    );
    return c.json({ name, ...tier }, row?.created ? 201 : 200);
  });

  admin.patch('/keys/:id', async (c) => {
    const { id } = validate(keyParams, c.req.param());
    const { tier: tierName } = await readJson(c, keyBody);
    const [known] = await drizzle.select({ name: rateTiers.name }).from(rateTiers).where(eq(rateTiers.name, tierName));
    if (!known) throw invalidParameter('tier', `names no tier: ${tierName}`);
    const [key] = await store.change(
      (db) =>
        db
          .update(apiKeys)
          .set({ tier: tierName })
          .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
          .returning(keyColumns),
      (rows) => ({ keys: rows.map((row) => row.id) }),
    );
    if (!key) throw new ApiError('not_found', `No key with id ${id}`);
    return c.json(key);
  });

  admin.delete('/keys/:id', async (c) => {
    const { id } = validate(keyParams, c.req.param());
    const [key] = await store.change(
      (db) =>
        db
          .update(apiKeys)
          .set({ revokedAt: sqlNow })
          .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
          .returning({ id: apiKeys.id }),
      (rows) => ({ keys: rows.map((row) => row.id) }),
    );
    if (!key) throw new ApiError('not_found', `No key with id ${id}`);
    return c.body(null, 204);
  });

  admin.all('/tiers', methodNotAllowed('GET, HEAD'));
  admin.all('/tiers/:name', methodNotAllowed('PUT'));
  admin.all('/keys/:id', methodNotAllowed('PATCH, DELETE'));
  return admin;
}
