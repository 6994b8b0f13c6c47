// Drizzle schema: the service's own tables (the limiter, keys, tiers, settings), all in its own schema
// (SERVICE_SCHEMA, db/service-schema.ts), which its migrations create; nothing of the service lives elsewhere.
// The demo's tables are the demo's (demo/schema.ts).
import { sql } from 'drizzle-orm';
import { bigint, check, customType, doublePrecision, integer, jsonb, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { SERVICE_SCHEMA } from './service-schema.ts';

/** The service's own schema: every table below is in it. */
const service = pgSchema(SERVICE_SCHEMA);

// Key hashes are raw bytes.
const bytea = customType<{ data: Buffer }>({ dataType: () => 'bytea' });

// Every timestamp is timestamptz at microsecond precision; the service reads it as text
// (never through a JS Date) so no microsecond is lost.
const micros = (name: string) => timestamp(name, { withTimezone: true, precision: 6, mode: 'string' });

// Service-wide settings shared by all instances, e.g. the generated cursor secret.
export const settings = service.table('settings', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
});

// ---- Rate limit (docs/explanation/rate-limit.md, "The algorithm and its guarantee" and "How it runs in PostgreSQL"; docs/reference/limits.md, "Tiers"). The decision itself
// is the plpgsql function rate_decide (db/functions/rate_decide.sql; the default tiers are inserted by the
// custom migration db/migrations/0001_service_settings.sql); these tables are what it reads and writes.

/** Tiers: an allowance of `allowance` units per `window_seconds`, and a cap on concurrent requests. */
export const rateTiers = service.table(
  'rate_tiers',
  {
    name: text('name').primaryKey(),
    allowance: integer('allowance').notNull(),
    windowSeconds: integer('window_seconds').notNull(),
    concurrency: integer('concurrency').notNull(),
  },
  (t) => [check('rate_tiers_values_check', sql`${t.allowance} >= 1 AND ${t.windowSeconds} >= 1 AND ${t.concurrency} >= 1`)],
);

/**
 * API keys: only a SHA-256 of the key is stored; a revoked key keeps its row (revoked_at set). rate_decide returns
 * a live key's collections and claims with its decision, from the same lookup.
 */
export const apiKeys = service.table(
  'api_keys',
  {
    id: text('id').primaryKey(),
    keyHash: bytea('key_hash').notNull(),
    /** The first characters of the key, so an operator can tell keys apart without the secret. */
    prefix: text('prefix').notNull(),
    name: text('name'),
    tier: text('tier')
      .notNull()
      .references(() => rateTiers.name, { onUpdate: 'cascade' }),
    createdAt: micros('created_at').notNull().default(sql`clock_timestamp()`),
    revokedAt: micros('revoked_at'),
    /** The collections the key may read; NULL: every collection (docs/reference/api.md, "Keys: scopes and claims"). */
    collections: text('collections').array(),
    /** What the collections' row rules compare their columns with: a JSON object, `{}` for none. */
    claims: jsonb('claims').$type<Record<string, unknown>>().notNull().default({}),
  },
  // Every rate-limited request with a key looks it up by hash, inside rate_decide.
  (t) => [uniqueIndex('api_keys_key_hash_idx').on(t.keyHash)],
);

/**
 * The rate-limit state of one subject (a key, an address, or an address registering keys), in one row:
 * the bucketed sliding window and the concurrency leases. rate_decide reads it under a row lock and
 * writes it back with one UPDATE per batch of decisions, so a busy subject costs one row, updated in
 * place, and never a new row or index entry per request or per second. Hot rows: only the primary key
 * is indexed, and the table has fillfactor 50 (set in the custom migration, 0001_service_settings.sql), so
 * every update is a HOT update on the same page; rows stay uncompressed up to 4,000 bytes
 * (toast_tuple_target, the same migration), so a subject with many lease slots is not
 * compressed again at every update; rate_decide drops the released slots at the end of the lease arrays
 * when it writes the row (db/functions/rate_decide.sql).
 *
 * The window: `expires[i]` (Unix seconds, database clock) is when the `units[i]` units served in the
 * i-th bucket that still counts stop counting; expiries ascend, `used` is the sum of `units`, and
 * `last_start` is the start of the newest bucket. The leases: slot i is busy while `lease_expires[i]`
 * is in the future; `lease_tokens[i]` is the number of the lease that took it (from `lease_seq`, which
 * grows with every lease), so a late release never frees a slot taken again. `quiet_at`: from then on
 * nothing counts and no lease is live, so housekeeping may delete the row.
 */
export const rateWindows = service.table('rate_windows', {
  subject: text('subject').primaryKey(),
  lastStart: bigint('last_start', { mode: 'number' }).notNull(),
  used: bigint('used', { mode: 'number' }).notNull(),
  expires: bigint('expires', { mode: 'number' }).array().notNull(),
  units: integer('units').array().notNull(),
  leaseSeq: bigint('lease_seq', { mode: 'number' }).notNull(),
  leaseTokens: bigint('lease_tokens', { mode: 'number' }).array().notNull(),
  leaseExpires: doublePrecision('lease_expires').array().notNull(),
  quietAt: doublePrecision('quiet_at').notNull(),
});
