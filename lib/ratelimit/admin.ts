// The operator API (docs/reference/api.md, "Operator API"): tiers and keys, behind ADMIN_TOKEN.
import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import * as v from 'valibot';
import { apiKeys, rateTiers } from '../../db/schema.ts';
import { timestampText } from '../../db/timestamps.ts';
import { requireAdminToken } from '../http/bearer.ts';
import { limitBody, readJson, validate } from '../http/body.ts';
import { ApiError, type InvalidParam, invalidParameter, methodNotAllowed } from '../http/errors.ts';
import type { KeyStore } from './key-store.ts';
import { issueKey, keyName } from './keys.ts';

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

/** A key may name up to this many collections. */
const MAX_COLLECTIONS = 1000;
/** A key's claims, as JSON, take at most this many bytes: they travel with every decision of the key. */
export const MAX_CLAIMS_BYTES = 4096;
/** The body of a key route: claims of 4 KiB and a thousand collection names do not fit the usual 4 KiB. */
export const KEY_BODY_BYTES = 64 * 1024;

const tierName = v.pipe(v.string('must be the name of a tier'), v.regex(TIER_NAME, 'must be the name of a tier'));

const collectionsReason = `must be a list of at most ${MAX_COLLECTIONS} collection names`;
/** The first name that `names` holds twice. */
const twice = (names: readonly string[]) => names.find((name, i) => names.indexOf(name) !== i);
/** Collection names, each once; whether each names a collection is checked against the registry when asked. */
const collectionList = v.pipe(
  v.array(v.string('must be the name of a collection'), collectionsReason),
  v.maxLength(MAX_COLLECTIONS, collectionsReason),
  v.check(
    (names) => twice(names) === undefined,
    (issue) => `must name each collection once: ${twice(issue.input as string[])} is there twice`,
  ),
);

/** A surrogate without its other half. */
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** How deep claims may nest: far past what a dotted path names, and short of anything that strains a stack. */
const MAX_CLAIMS_DEPTH = 32;

const claimsReason = `must be a JSON object of at most ${MAX_CLAIMS_BYTES} bytes`;

/**
 * What is wrong with a key's claims, if anything. PostgreSQL's jsonb refuses text with NUL or an unpaired
 * surrogate (`"\ud800"`), and JSON.parse reads `1e999` as Infinity, which JSON.stringify would turn into null.
 * The walk keeps its own stack and the depth is checked before JSON.stringify measures the size: a body of
 * thousands of nested arrays must be a 400, not a stack overflow.
 */
function claimsProblem(claims: Record<string, unknown>): string | undefined {
  if (Object.hasOwn(claims, '')) return 'must not name a claim with the empty string';
  const unstorable = 'must hold no NUL character, unpaired surrogate or number out of range';
  const text = (value: string) => !value.includes('\0') && !UNPAIRED_SURROGATE.test(value);
  const pending: [unknown, number][] = [[claims, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, depth] = next;
    if (typeof value === 'string' && !text(value)) return unstorable;
    if (typeof value === 'number' && !Number.isFinite(value)) return unstorable;
    if (typeof value !== 'object' || value === null) continue;
    if (depth >= MAX_CLAIMS_DEPTH) return `must nest at most ${MAX_CLAIMS_DEPTH} levels deep`;
    for (const [name, item] of Object.entries(value)) {
      if (!Array.isArray(value) && !text(name)) return unstorable;
      pending.push([item, depth + 1]);
    }
  }
  return Buffer.byteLength(JSON.stringify(claims)) <= MAX_CLAIMS_BYTES ? undefined : claimsReason;
}

/**
 * A key's claims: a JSON object whose values are any JSON (row rules read strings, numbers and arrays of them,
 * nested objects by dotted paths). Taken as parsed, not rebuilt key by key: a claim named `constructor` or
 * `__proto__` is kept like any other.
 */
const claimsObject = v.pipe(
  v.custom<Record<string, unknown>>((input) => typeof input === 'object' && input !== null && !Array.isArray(input), claimsReason),
  v.rawCheck(({ dataset, addIssue }) => {
    const problem = dataset.typed ? claimsProblem(dataset.value) : undefined;
    if (problem !== undefined) addIssue({ message: problem });
  }),
);

/** POST /admin/keys: a new key's tier, and what it may read (no collections, or null: every collection). */
export const newKeyBody = v.strictObject({
  name: v.optional(keyName),
  tier: tierName,
  collections: v.optional(v.nullable(collectionList)),
  claims: v.optional(claimsObject),
});
/** PATCH /admin/keys/{id}: what changes, at least one of them; `collections: null` is every collection again. */
export const keyBody = v.strictObject({
  tier: v.optional(tierName),
  collections: v.optional(v.nullable(collectionList)),
  claims: v.optional(claimsObject),
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
  collections: apiKeys.collections,
  claims: apiKeys.claims,
  // RFC 3339 UTC with six fractional digits, like every timestamp the API prints.
  createdAt: sql<string>`${timestampText(apiKeys.createdAt)}`,
  revokedAt: sql<string | null>`${timestampText(apiKeys.revokedAt)}`,
};

/** A key as the operator API prints it: never the key or its hash; `revokedAt` only once revoked. */
function keyView<Row extends { readonly revokedAt: string | null }>({ revokedAt, ...key }: Row) {
  return revokedAt === null ? key : { ...key, revokedAt };
}

export interface AdminOptions {
  /** The collections served now: a key's `collections` may name only these. */
  readonly collectionNames: () => ReadonlySet<string>;
}

/**
 * The /admin routes. Every change is a plain write to the tables that each rate-limit decision reads
 * in its one statement (a key's tier, collections and claims among them), so every instance applies it from
 * its next request on; with several limiter databases, written to each of them before it commits
 * (lib/ratelimit/key-store.ts).
 */
export function adminRoutes(store: KeyStore, adminToken: string, options: AdminOptions): Hono {
  const { drizzle } = store;
  const admin = new Hono();
  admin.use('*', requireAdminToken(adminToken, 'The operator API'));
  admin.use('/tiers/*', limitBody());
  admin.use('/keys/*', limitBody(KEY_BODY_BYTES));

  /** What is wrong with a key's tier and collections beyond their form: a tier or collection that does not exist. */
  async function unknownNames(tier: string | undefined, collections: readonly string[] | null | undefined): Promise<InvalidParam[]> {
    const problems: InvalidParam[] = [];
    if (tier !== undefined) {
      const [known] = await drizzle.select({ name: rateTiers.name }).from(rateTiers).where(eq(rateTiers.name, tier));
      if (!known) problems.push({ name: 'tier', reason: `names no tier: ${tier}` });
    }
    if (collections) {
      const served = options.collectionNames();
      const unknown = collections.filter((name) => !served.has(name));
      if (unknown.length > 0) {
        const listed = unknown.length > 10 ? `${unknown.slice(0, 10).join(', ')} and ${unknown.length - 10} more` : unknown.join(', ');
        problems.push({ name: 'collections', reason: `names no collection: ${listed}` });
      }
    }
    return problems;
  }

  function refuse(problems: InvalidParam[]): void {
    if (problems.length === 0) return;
    throw new ApiError('invalid_parameter', problems.map((p) => `${p.name} ${p.reason}`).join('; '), { invalidParams: problems });
  }

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

  admin.post('/keys', async (c) => {
    const body = await readJson(c, newKeyBody);
    refuse(await unknownNames(body.tier, body.collections));
    const fields = { name: body.name, tier: body.tier, collections: body.collections ?? null, claims: body.claims ?? {} };
    const { id, key, prefix, createdAt } = await issueKey(store, fields);
    const { name, ...rest } = fields;
    return c.json({ id, key, prefix, name: name ?? null, ...rest, createdAt }, 201);
  });

  admin.get('/keys/:id', async (c) => {
    const { id } = validate(keyParams, c.req.param());
    const [key] = await drizzle.select(keyColumns).from(apiKeys).where(eq(apiKeys.id, id));
    if (!key) throw new ApiError('not_found', `No key with id ${id}`);
    return c.json(keyView(key));
  });

  admin.patch('/keys/:id', async (c) => {
    const { id } = validate(keyParams, c.req.param());
    const change = await readJson(c, keyBody);
    if (Object.keys(change).length === 0) throw invalidParameter('body', 'must change at least one of tier, collections and claims');
    refuse(await unknownNames(change.tier, change.collections));
    const [key] = await store.change(
      (db) =>
        db
          .update(apiKeys)
          .set(change)
          .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
          .returning(keyColumns),
      (rows) => ({ keys: rows.map((row) => row.id) }),
    );
    if (!key) throw new ApiError('not_found', `No key with id ${id}`);
    return c.json(keyView(key));
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
  admin.all('/keys', methodNotAllowed('POST'));
  admin.all('/keys/:id', methodNotAllowed('GET, HEAD, PATCH, DELETE'));
  return admin;
}
