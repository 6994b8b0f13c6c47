// Drizzle schema: the demo collections and the service's own settings.
import { sql } from 'drizzle-orm';
import {
  bigint,
  customType,
  doublePrecision,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

// Key hashes are raw bytes.
const bytea = customType<{ data: Buffer }>({ dataType: () => 'bytea' });

// Every timestamp is timestamptz at microsecond precision; the service reads it as text
// (never through a JS Date) so no microsecond is lost.
const micros = (name: string) => timestamp(name, { withTimezone: true, precision: 6, mode: 'string' });

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
  ],
);

// Service-wide settings shared by all instances, e.g. the generated cursor secret.
export const settings = pgTable('settings', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
});

// ---- Rate limit (SPEC.md 2.2, 3, 5, 8; API.md "Rate limit"). The decision itself is the plpgsql
// function rate_decide in the custom migration; these tables are what it reads and writes.

/** Tiers: an allowance of `allowance` units per `window_seconds`, and a cap on concurrent requests. */
export const rateTiers = pgTable('rate_tiers', {
  name: text('name').primaryKey(),
  allowance: integer('allowance').notNull(),
  windowSeconds: integer('window_seconds').notNull(),
  concurrency: integer('concurrency').notNull(),
});

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
 * Counters of the bucketed sliding window: units served to one subject in the bucket that starts at
 * `bucket_start` (Unix seconds). A unit counts while the database clock is before `expires_at`
 * (= bucket_start + bucket length + window length). Hot rows: only the primary key is indexed, and
 * the table has fillfactor 50 (set in the custom migration), so the per-request `units` update is a
 * HOT update that touches no index. Housekeeping deletes expired rows with a scan of this small table.
 */
export const rateCounters = pgTable(
  'rate_counters',
  {
    subject: text('subject').notNull(),
    bucketStart: bigint('bucket_start', { mode: 'number' }).notNull(),
    units: bigint('units', { mode: 'number' }).notNull(),
    expiresAt: bigint('expires_at', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.subject, t.bucketStart] })],
);

/**
 * Concurrency leases, as slots: a subject holds at most `concurrency` rows, one per slot, each busy while
 * `expires_at` (Unix seconds, database clock) is in the future. Taking a slot and ending a request both
 * update a row in place (HOT, no index entry, no dead row for every request); `token` grows with every
 * lease, so a late release never frees a slot that was taken again after its lease expired. A lease left
 * behind by an instance that died mid-request stops counting at `expires_at`. The primary key serves the
 * count, the taking and the release.
 */
export const rateSlots = pgTable(
  'rate_slots',
  {
    subject: text('subject').notNull(),
    slot: integer('slot').notNull(),
    token: bigint('token', { mode: 'number' }).notNull(),
    expiresAt: doublePrecision('expires_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.subject, t.slot] })],
);
