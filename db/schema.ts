// Drizzle schema: the demo collections and the service's own settings.
import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  check,
  customType,
  doublePrecision,
  index,
  integer,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

// Key hashes are raw bytes.
const bytea = customType<{ data: Buffer }>({ dataType: () => 'bytea' });

// Every timestamp is timestamptz at microsecond precision; the service reads it as text
// (never through a JS Date) so no microsecond is lost.
const micros = (name: string) => timestamp(name, { withTimezone: true, precision: 6, mode: 'string' });

/**
 * A collection's timestamps must be printable as RFC 3339, whose years run from 0000 to 9999, and must
 * order and compare as instants: finite, from year 1 to year 9999 in UTC. Refusing ±infinity, BC dates and
 * years past 9999 when the row is written keeps every item printable and every cursor followable.
 */
function rfc3339Range(name: string, column: AnyPgColumn) {
  return check(name, sql`${column} >= '0001-01-01T00:00:00Z' and ${column} < '10000-01-01T00:00:00Z'`);
}

export const products = pgTable(
  'products',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity(),
    name: text('name').notNull(),
    category: text('category').notNull(),
    priceCents: integer('price_cents').notNull(),
    createdAt: micros('created_at').notNull().default(sql`clock_timestamp()`),
  },
  (t) => [
    // Keyset orders end with id; each sort key has an index that serves (key, id) both ways.
    index('products_name_id_idx').on(t.name, t.id),
    index('products_price_cents_id_idx').on(t.priceCents, t.id),
    index('products_created_at_id_idx').on(t.createdAt, t.id),
    index('products_category_id_idx').on(t.category, t.id),
    // name[prefix] is a LIKE 'abc%'; only a pattern-ops index serves it under a non-C collation.
    index('products_name_prefix_idx').on(t.name.op('text_pattern_ops')),
    rfc3339Range('products_created_at_rfc3339', t.createdAt),
  ],
);

export const orders = pgTable(
  'orders',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity(),
    customerId: integer('customer_id').notNull(),
    status: text('status').notNull(),
    totalCents: integer('total_cents').notNull(),
    createdAt: micros('created_at').notNull().default(sql`clock_timestamp()`),
  },
  (t) => [
    index('orders_created_at_id_idx').on(t.createdAt, t.id),
    index('orders_total_cents_id_idx').on(t.totalCents, t.id),
    index('orders_status_created_at_id_idx').on(t.status, t.createdAt, t.id),
    index('orders_customer_id_created_at_id_idx').on(t.customerId, t.createdAt, t.id),
    rfc3339Range('orders_created_at_rfc3339', t.createdAt),
  ],
);

export const events = pgTable(
  'events',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity(),
    type: text('type').notNull(),
    source: text('source').notNull(),
    occurredAt: micros('occurred_at').notNull().default(sql`clock_timestamp()`),
    message: text('message').notNull().default(''),
  },
  (t) => [
    index('events_occurred_at_id_idx').on(t.occurredAt, t.id),
    index('events_type_occurred_at_id_idx').on(t.type, t.occurredAt, t.id),
    index('events_source_occurred_at_id_idx').on(t.source, t.occurredAt, t.id),
    rfc3339Range('events_occurred_at_rfc3339', t.occurredAt),
  ],
);

// Service-wide settings shared by all instances, e.g. the generated cursor secret.
export const settings = pgTable('settings', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
});

// ---- Rate limit (docs/rate-limit.md, "The algorithm", "Tiers" and "In PostgreSQL"). The decision itself
// is the plpgsql function rate_decide (db/functions/rate_decide.sql; the default tiers are inserted by the
// custom migration db/migrations/0001_functions.sql); these tables are what it reads and writes.

/** Tiers: an allowance of `allowance` units per `window_seconds`, and a cap on concurrent requests. */
export const rateTiers = pgTable(
  'rate_tiers',
  {
    name: text('name').primaryKey(),
    allowance: integer('allowance').notNull(),
    windowSeconds: integer('window_seconds').notNull(),
    concurrency: integer('concurrency').notNull(),
  },
  (t) => [check('rate_tiers_values_check', sql`${t.allowance} >= 1 AND ${t.windowSeconds} >= 1 AND ${t.concurrency} >= 1`)],
);

/** API keys: only a SHA-256 of the key is stored; a revoked key keeps its row (revoked_at set). */
export const apiKeys = pgTable(
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
  },
  // Every rate-limited request with a key looks it up by hash, inside rate_decide.
  (t) => [uniqueIndex('api_keys_key_hash_idx').on(t.keyHash)],
);

/**
 * The rate-limit state of one subject (a key, an address, or an address registering keys), in one row:
 * the bucketed sliding window and the concurrency leases. rate_decide reads it under a row lock and
 * writes it back with one UPDATE per batch of decisions, so a busy subject costs one row, updated in
 * place, and never a new row or index entry per request or per second. Hot rows: only the primary key
 * is indexed, and the table has fillfactor 50 (set in the custom migration, 0001_functions.sql), so
 * every update is a HOT update on the same page; rows stay uncompressed up to 4,000 bytes
 * (toast_tuple_target, 0005_rate_windows_toast_target.sql), so a subject with many lease slots is not
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
export const rateWindows = pgTable('rate_windows', {
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
