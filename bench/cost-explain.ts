// `node bench/cost-explain.ts <database url> [url paths…]`: the database time of the service's own queries, for the cost rule.
// Each path is served once through the app (limiter off) to capture the SQL it runs, then every captured
// statement is run under EXPLAIN ANALYZE a few times; the median execution time is printed with the plan's top nodes.
import { drizzle } from 'drizzle-orm/postgres-js';
import { type Database, openDatabase } from '../db/client.ts';
import * as schema from '../db/schema.ts';
import { demoRegistry } from '../demo/collections.ts';
import { rawQueryOf } from '../lib/pagination/params.ts';
import { requestCost } from '../lib/pagination/prepare.ts';
import { buildApp } from '../lib/service/app.ts';
import { parseConfig } from '../lib/service/config.ts';

const [url, ...given] = process.argv.slice(2);
if (!url) throw new Error('Usage: node bench/cost-explain.ts <database url> [paths…]');
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const offsets = [0, 1_000, 10_000, 100_000, 999_000];
const sorts = ['id', '-priceCents', 'name', '-priceCents,name', 'name,priceCents', 'createdAt,-name'];
const defaults = [
  ...sorts.flatMap((sort) => offsets.map((offset) => `/v1/products?count=none&sort=${sort}&offset=${offset}`)),
  '/v1/products?count=exact&limit=1',
  '/v1/products?count=exact&limit=1&category=books',
  '/v1/products?page-size=20&sort=-priceCents,name',
  '/v1/products?page-size=20&sort=createdAt,-name',
  '/v1/products?count=none&category=books&sort=-priceCents&offset=0',
  '/v1/products?count=none&category=books&sort=-priceCents&offset=100000',
  '/v1/products?count=none&priceCents[lt]=5000&sort=name&offset=0',
  '/v1/products?count=none&priceCents[lt]=5000&sort=name&offset=40000',
  '/v1/products?count=none&name[prefix]=Fine&sort=-createdAt&offset=0',
  '/v1/orders?page-size=20',
  '/v1/events?page-size=20',
];
const paths = given.length > 0 ? given : defaults;

const captured: { query: string; params: unknown[] }[] = [];
const opened = openDatabase(url, { max: 2 });
const { sql } = opened;
// The app's own database, with a Drizzle logger that captures each query for EXPLAIN.
const database: Database = {
  ...opened,
  drizzle: drizzle(sql, { schema, logger: { logQuery: (query, params) => captured.push({ query, params }) } }),
};
const registry = demoRegistry();
const cursorSecret = 'x'.repeat(32);
const app = buildApp({ database, config: parseConfig({}), registry, cursorSecret, log: () => {} });

interface PlanNode {
  'Node Type': string;
  'Sort Method'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): string {
  const label = [plan['Node Type'], plan['Index Name'], plan['Sort Method']].filter(Boolean).join(' ');
  const inner = (plan.Plans ?? []).map(nodes).join(', ');
  return inner ? `${label} (${inner})` : label;
}

for (const path of paths) {
  captured.length = 0;
  const res = await app.request(`http://bench.local${path}`);
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  const collection = registry.get(new URL(path, 'http://x').pathname.split('/')[2]!);
  const cost = requestCost(collection, rawQueryOf(path), cursorSecret);
  for (const { query, params } of captured) {
    const times: number[] = [];
    let plan: PlanNode | undefined;
    for (let round = 0; round < ROUNDS; round++) {
      const [row] = await sql.unsafe(`explain (analyze, format json) ${query}`, params as never[]);
      const [result] = row!['QUERY PLAN'] as [{ 'Execution Time': number; Plan: PlanNode }];
      times.push(result['Execution Time']);
      plan = result.Plan;
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)]!;
    const kind = query.includes('count(') ? 'count' : query.startsWith('explain') ? 'estimate' : 'chunk';
    console.log(`${median.toFixed(2).padStart(9)} ms  cost ${String(cost).padStart(4)}  ${kind.padEnd(5)} ${path}  ${nodes(plan!)}`);
  }
}
await opened.close();
