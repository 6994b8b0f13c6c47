// What the bench's hand-written servers (bench/floor-server.ts, bench/peer-fastify.ts) answer the chunk by price
// with, as the service does: its rows, their items, and the cursor after the last one.
import { createHmac } from 'node:crypto';

export interface ProductRow {
  id: number;
  name: string;
  category: string;
  price_cents: number;
  created_at: string;
}

/**
 * PostgreSQL's timestamptz text in UTC (`2025-06-08 06:53:58.54737+00`, trailing zeros of the fraction
 * dropped) as RFC 3339 with six fractional digits, as the service prints it. Exact for years 1 to 9999,
 * which the tables' check constraints guarantee (docs/reference/database.md, "Timestamps in the tables").
 */
function rfc3339(text: string): string {
  const seconds = `${text.slice(0, 10)}T${text.slice(11, 19)}`;
  const fraction = text.charCodeAt(19) === 46 /* . */ ? text.slice(20, text.length - 3) : '';
  return `${seconds}.${fraction.padEnd(6, '0')}Z`;
}

/** A row as the service's item. */
export function productItem(row: ProductRow) {
  return { id: row.id, name: row.name, category: row.category, priceCents: row.price_cents, createdAt: rfc3339(row.created_at) };
}

/**
 * The service's cursor for the position after (priceCents, id): the same payload (an int8 id as its text,
 * docs/reference/api.md, "Values"), encoding and HMAC, under `secret`.
 */
export function nextCursor(secret: string, priceCents: number, id: number, from: number | undefined): string {
  const filters = from === undefined ? [] : [['priceCents[gte]', String(from)]];
  const payload = { v: 'cursor', c: 'products', s: 'priceCents,id', f: filters, k: [priceCents, String(id)] };
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `v1.${body}.${createHmac('sha256', secret).update(`v1.${body}`).digest('base64url')}`;
}
