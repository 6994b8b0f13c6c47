// Drizzle schema: the demo collections and the service's own settings.
import { sql } from 'drizzle-orm';
import { bigint, index, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

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
