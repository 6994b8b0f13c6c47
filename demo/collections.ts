// The demo collections the service ships with: products, orders and events (docs/api.md, "Collections").

import { type CostRule, createRegistry, defineCollection, type Registry } from '../lib/pagination/registry.ts';
import { events, orders, products } from './schema.ts';

const demoPageSize = { default: 20, max: 100 } as const;
// Skipping rows along the primary key reads the heap in order; along any other index it reads the heap at
// random, several times dearer a row, so those indexes skip fewer rows per unit (docs/rate-limit.md, "What
// the numbers rest on").
function demoCost(indexed: Record<string, number>): CostRule {
  return { itemsPerUnit: 50, countedPerUnit: 5_000, indexed: { id: 10_000, ...indexed } };
}

/** The demo collections (docs/api.md, "Collections"). */
export function demoRegistry(): Registry {
  return createRegistry([
    defineCollection({
      name: 'products',
      table: products,
      fields: {
        id: { column: products.id, type: 'bigint' },
        name: { column: products.name, type: 'text' },
        category: { column: products.category, type: 'text' },
        priceCents: { column: products.priceCents, type: 'integer' },
        createdAt: { column: products.createdAt, type: 'timestamp' },
      },
      variants: ['offset', 'page', 'cursor'],
      defaultVariant: 'offset',
      filters: {
        category: ['eq', 'in'],
        priceCents: ['eq', 'lt', 'lte', 'gt', 'gte'],
        name: ['eq', 'prefix'],
      },
      sortKeys: ['id', 'name', 'priceCents', 'createdAt'],
      defaultSort: 'id',
      pageSize: demoPageSize,
      cost: demoCost({ name: 1_000, priceCents: 1_000, createdAt: 1_000 }),
    }),
    defineCollection({
      name: 'orders',
      table: orders,
      fields: {
        id: { column: orders.id, type: 'bigint' },
        customerId: { column: orders.customerId, type: 'integer' },
        status: { column: orders.status, type: 'text' },
        totalCents: { column: orders.totalCents, type: 'integer' },
        createdAt: { column: orders.createdAt, type: 'timestamp' },
      },
      variants: ['cursor'],
      defaultVariant: 'cursor',
      filters: {
        status: ['eq', 'in'],
        customerId: ['eq'],
        totalCents: ['lt', 'lte', 'gt', 'gte'],
      },
      sortKeys: ['id', 'createdAt', 'totalCents'],
      defaultSort: '-createdAt',
      pageSize: demoPageSize,
      cost: demoCost({ createdAt: 1_000, totalCents: 1_000 }),
    }),
    defineCollection({
      name: 'events',
      table: events,
      fields: {
        id: { column: events.id, type: 'bigint' },
        type: { column: events.type, type: 'text' },
        source: { column: events.source, type: 'text' },
        occurredAt: { column: events.occurredAt, type: 'timestamp' },
        message: { column: events.message, type: 'text' },
      },
      variants: ['time', 'cursor'],
      defaultVariant: 'time',
      filters: { type: ['eq', 'in'], source: ['eq'] },
      sortKeys: [],
      defaultSort: '-occurredAt',
      timeField: 'occurredAt',
      pageSize: demoPageSize,
      cost: demoCost({ occurredAt: 1_000 }),
    }),
  ]);
}
