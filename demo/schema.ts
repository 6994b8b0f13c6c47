// The demo's Drizzle tables (products, orders, events), in schema `demo`: created by the demo's own migrations
// (demo/migrations, demo/migrate.ts), seeded by demo/seed.ts and served by its collections file
// (demo/collections.yaml), like any team's tables. Nothing of the service lives here.
import { sql } from 'drizzle-orm';
import { type AnyPgColumn, bigint, check, index, integer, pgSchema, text, timestamp } from 'drizzle-orm/pg-core';

/** The demo's schema. */
export const DEMO_SCHEMA = 'demo';
const demo = pgSchema(DEMO_SCHEMA);

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

export const products = demo.table(
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

export const orders = demo.table(
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

export const events = demo.table(
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
