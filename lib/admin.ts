// The operator API (API.md, "Keys and the operator API"): tiers and keys, behind ADMIN_TOKEN.
import { createHash, timingSafeEqual } from 'node:crypto';
import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { Db } from '../db/client.ts';
import { apiKeys, rateTiers } from '../db/schema.ts';
import { ApiError, invalidParameter, methodNotAllowed } from './errors.ts';

const TIER_NAME = /^[a-z][a-z0-9_-]{0,39}$/;
const tierFields = {
  limit: { min: 1, max: 1_000_000_000 },
  windowSeconds: { min: 1, max: 30 * 86_400 },
  concurrency: { min: 1, max: 1_000_000 },
} as const;

type TierBody = { limit: number; windowSeconds: number; concurrency: number };

// xmax = 0 only on a freshly inserted row: tells create (201) from change (200) in one statement.
const sqlCreated = sql<boolean>`(xmax = 0)`;
const sqlNow = sql`clock_timestamp()`;

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Bearer $ADMIN_TOKEN, compared in constant time (digests of equal length, timingSafeEqual). */
function requireToken(adminToken: string): MiddlewareHandler {
  const expected = digest(adminToken);
  return async function adminAuth(c, next) {
    const header = c.req.header('authorization');
    if (header === undefined) throw new ApiError('unauthorized', 'The operator API needs Authorization: Bearer <admin token>');
    const token = /^Bearer +(\S+) *$/i.exec(header)?.[1] ?? '';
    if (!timingSafeEqual(digest(token), expected)) throw new ApiError('forbidden', 'The admin token is not valid');
    await next();
  };
}

async function readObject(c: Context): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = JSON.parse(await c.req.text());
  } catch {
    throw invalidParameter('body', 'must be a JSON object');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidParameter('body', 'must be a JSON object');
  return body as Record<string, unknown>;
}

function parseTierBody(body: Record<string, unknown>): TierBody {
  for (const field of Object.keys(body)) if (!(field in tierFields)) throw invalidParameter(field, 'is not a known field');
  const values: Partial<TierBody> = {};
  for (const [field, { min, max }] of Object.entries(tierFields) as [keyof TierBody, { min: number; max: number }][]) {
    const value = body[field];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      throw invalidParameter(field, `must be an integer from ${min} to ${max}`);
    }
    values[field] = value;
  }
  return values as TierBody;
}

const tierColumns = {
  name: rateTiers.name,
  limit: rateTiers.allowance,
  windowSeconds: rateTiers.windowSeconds,
  concurrency: rateTiers.concurrency,
};

const keyColumns = { id: apiKeys.id, prefix: apiKeys.prefix, name: apiKeys.name, tier: apiKeys.tier, createdAt: apiKeys.createdAt };

/**
 * The /admin routes. Every change is a plain write to the tables that each rate-limit decision reads
 * in its one statement, so every instance applies it from its next request on.
 */
export function adminRoutes(db: Db, adminToken: string): Hono {
  const admin = new Hono();
  admin.use('*', requireToken(adminToken));

  admin.get('/tiers', async (c) => {
    const tiers = await db.select(tierColumns).from(rateTiers).orderBy(asc(rateTiers.allowance), asc(rateTiers.name));
    return c.json({ tiers });
  });

  admin.put('/tiers/:name', async (c) => {
    const name = c.req.param('name');
    if (!TIER_NAME.test(name)) throw invalidParameter('name', 'must be 1 to 40 of a-z, 0-9, _ and -, starting with a letter');
    const tier = parseTierBody(await readObject(c));
    const values = { allowance: tier.limit, windowSeconds: tier.windowSeconds, concurrency: tier.concurrency };
    const [row] = await db
      .insert(rateTiers)
      .values({ name, ...values })
      .onConflictDoUpdate({ target: rateTiers.name, set: values })
      .returning({ created: sqlCreated });
    return c.json({ name, ...tier }, row?.created ? 201 : 200);
  });

  admin.patch('/keys/:id', async (c) => {
    const body = await readObject(c);
    for (const field of Object.keys(body)) if (field !== 'tier') throw invalidParameter(field, 'is not a known field');
    if (typeof body.tier !== 'string') throw invalidParameter('tier', 'must be the name of a tier');
    const tierName = body.tier;
    const [known] = await db.select({ name: rateTiers.name }).from(rateTiers).where(eq(rateTiers.name, tierName));
    if (!known) throw invalidParameter('tier', `names no tier: ${tierName}`);
    const [key] = await db
      .update(apiKeys)
      .set({ tier: tierName })
      .where(and(eq(apiKeys.id, c.req.param('id')), isNull(apiKeys.revokedAt)))
      .returning(keyColumns);
    if (!key) throw new ApiError('not_found', `No key with id ${c.req.param('id')}`);
    return c.json(key);
  });

  admin.delete('/keys/:id', async (c) => {
    const [key] = await db
      .update(apiKeys)
      .set({ revokedAt: sqlNow })
      .where(and(eq(apiKeys.id, c.req.param('id')), isNull(apiKeys.revokedAt)))
      .returning({ id: apiKeys.id });
    if (!key) throw new ApiError('not_found', `No key with id ${c.req.param('id')}`);
    return c.body(null, 204);
  });

  admin.all('/tiers', methodNotAllowed('GET, HEAD'));
  admin.all('/tiers/:name', methodNotAllowed('PUT'));
  admin.all('/keys/:id', methodNotAllowed('PATCH, DELETE'));
  return admin;
}
