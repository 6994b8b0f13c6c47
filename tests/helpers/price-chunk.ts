// What the bench's hand-written servers (the floor, the Fastify peer) are checked on against the service: products
// that make a chunk by price hard to print alike, and a cursor's payload read without its signature.
import type { Sql } from 'postgres';

/**
 * 30 products with ties on the price (the id decides), timestamps at the ends of the range and with trailing
 * zeros in the fraction, and text that JSON must escape.
 */
export async function seedTrickyProducts(sql: Sql): Promise<void> {
  const timestamps = [
    '0001-01-01T00:00:00.000000Z',
    '9999-12-31T23:59:59.999999Z',
    '2025-06-08T06:53:58.547370Z',
    '2025-01-01T00:00:00.100000Z',
    '2025-01-01T00:00:00.000001Z',
    '1970-01-01T00:00:00.000000Z',
  ];
  const rows = Array.from({ length: 30 }, (_, i) => ({
    name: i % 7 === 0 ? `Quote "${i}" \\ é ☃\ttab` : `Item ${i}`,
    category: ['books', 'toys'][i % 2]!,
    price_cents: 100 + (i % 3),
    created_at: timestamps[i % timestamps.length]!,
  }));
  await sql`insert into demo.products ${sql(rows)}`;
}

/** A cursor's payload, the middle part of `v1.<payload>.<signature>` (each server signs with its own secret). */
export function cursorPayload(href: string): unknown {
  const cursor = new URL(href).searchParams.get('cursor')!;
  return JSON.parse(Buffer.from(cursor.split('.')[1]!, 'base64url').toString('utf8'));
}
