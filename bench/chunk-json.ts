// `node bench/chunk-json.ts <database url> [queries]`: where a chunk's JSON is cheaper to build, in Node or in
// PostgreSQL (docs/benchmarks.md, "Where a chunk's JSON is built"). On a database with the bench's products (npm run
// bench seeds them), ten connections run "another chunk each" (a keyset chunk of 20 by price from another price at
// every query) in three forms, in rotation, and this prints the CPU per chunk of this process and of the ten
// backends (from /proc, so PostgreSQL must run on this host):
//   rows:    the service's form: rows as arrays, each item made and printed in Node (db/timestamps.ts prints the
//            timestamps), the last item's key values for the cursor;
//   json:    the chunk as PostgREST builds it, plus what the links need: one JSON text of the items (timestamps
//            printed by to_char with six fractional digits), whether a row follows, the last item's key values;
//   json, bare: `json_agg` of the rows as they are (PostgreSQL's own timestamp text, no `more`, no key values):
//            the least PostgreSQL can do, for scale. Not part of the tests.
import { readFileSync } from 'node:fs';
import postgres from 'postgres';
import { formatEpoch } from '../db/timestamps.ts';

const [url, queriesArg = '20000'] = process.argv.slice(2);
if (!url) {
  console.error('Usage: node bench/chunk-json.ts <database url> [queries]');
  process.exit(2);
}
const QUERIES = Number(queriesArg);
const CONNECTIONS = 10;
const PAGE = 20;
const ROUNDS = 3;

const ITEM = `json_build_object('id', id, 'name', name, 'category', category, 'priceCents', price_cents,
  'createdAt', to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))`;
const CHUNK = `select id, name, category, price_cents, created_at from demo.products where price_cents >= $1
  order by price_cents, id limit ${PAGE + 1}`;
const forms = {
  rows: `select id, name, category, price_cents, extract(epoch from created_at) from demo.products where price_cents >= $1
    order by price_cents, id limit ${PAGE + 1}`,
  json: `select coalesce(json_agg(${ITEM} order by price_cents, id) filter (where n <= ${PAGE}), '[]')::text, count(*) > ${PAGE},
    (array_agg(json_build_array(price_cents, id) order by price_cents desc, id desc) filter (where n <= ${PAGE}))[1]::text
    from (select *, row_number() over (order by price_cents, id) n from (${CHUNK}) c) c`,
  'json, bare': `select coalesce(json_agg(c), '[]')::text from (${CHUNK}) c`,
} as const;
type Form = keyof typeof forms;

const NAMES = ['id', 'name', 'category', 'priceCents', 'createdAt'];

/** The chunk's items JSON and the last item's key values, as each form gives them: what the service would send. */
async function chunk(sql: postgres.Sql, form: Form, price: number): Promise<number> {
  const rows = (await sql.unsafe(forms[form], [price], { prepare: true }).values()) as unknown[][];
  if (form === 'rows') {
    const items: Record<string, unknown>[] = [];
    for (const row of rows.slice(0, PAGE)) {
      const item: Record<string, unknown> = {};
      NAMES.forEach((name, at) => {
        item[name] = name === 'createdAt' ? formatEpoch(row[at] as string) : row[at];
      });
      items.push(item);
    }
    const last = items.at(-1);
    return JSON.stringify(items).length + (last ? JSON.stringify([last.priceCents, last.id]).length : 0);
  }
  const [items, , last] = rows[0] as [string, boolean, string | null];
  return items.length + (last ? (JSON.parse(last) as unknown[]).length : 0);
}

function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 1e4;
}

const connections = Array.from({ length: CONNECTIONS }, () => postgres(url, { max: 1, onnotice: () => {} }));
const backends = await Promise.all(connections.map(async (sql) => (await sql`select pg_backend_pid() as pid`)[0]!.pid as number));

async function run(form: Form, queries: number): Promise<{ node: number; pg: number }> {
  const pg0 = backends.map(cpuMicros);
  const node0 = process.cpuUsage();
  await Promise.all(
    connections.map(async (sql, k) => {
      for (let i = 0; i < queries / CONNECTIONS; i++) await chunk(sql, form, (i * 131 + k * 9973) % 99_000);
    }),
  );
  const node = process.cpuUsage(node0);
  const pg = backends.reduce((sum, pid, at) => sum + cpuMicros(pid) - pg0[at]!, 0);
  return { node: (node.user + node.system) / queries, pg: pg / queries };
}

const results = new Map<Form, { node: number; pg: number }[]>();
for (const form of Object.keys(forms) as Form[]) await run(form, 1000); // prepare and warm each form
for (let round = 0; round < ROUNDS; round++) {
  for (const form of Object.keys(forms) as Form[]) results.set(form, [...(results.get(form) ?? []), await run(form, QUERIES)]);
}
await Promise.all(connections.map((sql) => sql.end()));

const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
console.log(`| form | node µs/chunk | pg µs/chunk | both |\n|---|---:|---:|---:|`);
for (const [form, runs] of results) {
  const node = median(runs.map((r) => r.node));
  const pg = median(runs.map((r) => r.pg));
  console.log(`| ${form} | ${node.toFixed(1)} | ${pg.toFixed(1)} | ${(node + pg).toFixed(1)} |`);
}
