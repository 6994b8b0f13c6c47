// The tenants' rows of `npm run bench`: one tenant's chunk of a table of many tenants' orders, read with an
// ordinary filter and an API key, then through a row rule (docs/reference/collections-file.md, "Access") with
// keys that carry claims and with HS256 tokens. Both collections serve the same table from the same server, so
// that the rows differ in the rule and the credential, not in the data.
import { createHmac, randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type autocannon from 'autocannon';
import type { Sql } from 'postgres';
import type { ServerVariant } from './processes.ts';
import type { Comparison, Scenario, ScenarioContext } from './scenario-types.ts';

const TENANTS = 1_000;
const ORDERS = 1_000_000;
const TABLE = 'bench_tenants.orders';
/** What the table's comment says once it is seeded: a table seeded otherwise (another size, an older layout) is seeded again. */
const SEEDED = `bench tenants v1: ${ORDERS} orders over ${TENANTS} tenants`;
/** The tier of every key and token of these rows: a limit no run reaches, so that none is ever a 429. */
const TIER = 'bench-tenants';
// The operator token and the token secret of the server these rows start; they live only as long as the bench.
const ADMIN_TOKEN = randomBytes(24).toString('hex');
const JWT_SECRET = randomBytes(32).toString('hex');
const COLLECTIONS_FILE = path.join(tmpdir(), `bench-tenants-${process.pid}.json`);
const CLIENTS = 32;

/**
 * Two collections over the same table: `orders`, which a client narrows to a tenant with the filter
 * `tenant_id=N`, and `my_orders`, whose row rule narrows it to the tenant of the client's claim `tenant`.
 * Both are served by the index (tenant_id, id).
 */
function collectionsFile(): string {
  const common = {
    relation: TABLE,
    columns: ['id', 'tenant_id', 'status', 'total_cents', 'created_at'],
    variants: ['cursor'],
    pageSize: { default: 20, max: 100 },
  };
  return JSON.stringify({
    collections: [
      { ...common, name: 'orders', filters: { tenant_id: ['eq'] } },
      { ...common, name: 'my_orders', access: { rows: { tenant_id: 'tenant' } } },
    ],
  });
}

/**
 * Seeds the orders unless the table already says it holds them (its comment): each tenant's orders spread over
 * the whole table, as orders taken over time are, so that a tenant's chunk reads 20 entries of the index
 * (tenant_id, id) and about as many pages of the table. One transaction: a failure leaves no half table.
 */
async function ensureTenantOrders(sql: Sql, log: (line: string) => void): Promise<void> {
  const [row] = await sql`select obj_description(to_regclass(${TABLE}), 'pg_class') as seeded`;
  if (row?.seeded === SEEDED) {
    log(`${TABLE} already holds ${ORDERS.toLocaleString('en')} orders of ${TENANTS.toLocaleString('en')} tenants; not reseeding`);
    return;
  }
  log(`Seeding ${TABLE}: ${ORDERS.toLocaleString('en')} orders of ${TENANTS.toLocaleString('en')} tenants`);
  const started = performance.now();
  await sql.begin(async (tx) => {
    await tx.unsafe(`
      create schema if not exists bench_tenants;
      drop table if exists ${TABLE};
      create table ${TABLE} (
        id integer primary key,
        tenant_id integer not null,
        status text not null,
        total_cents integer not null,
        created_at timestamptz not null
      );
      insert into ${TABLE}
      select i,
        1 + (hashint4(i) & 2147483647) % ${TENANTS},
        (array['pending', 'paid', 'shipped', 'delivered', 'cancelled'])[1 + (hashint4(-i) & 2147483647) % 5],
        500 + (hashint4(i + ${ORDERS}) & 2147483647) % 200000,
        timestamptz '2025-01-01 00:00:00+00' + i * interval '30 seconds'
      from generate_series(1, ${ORDERS}) as i;
      create index on ${TABLE} (tenant_id, id);
      comment on table ${TABLE} is '${SEEDED}';`);
  });
  // Outside the transaction: the visibility map set and the statistics read once, since nothing writes it after.
  await sql.unsafe(`vacuum (analyze) ${TABLE}`);
  log(`  ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/** The service as deployed, serving the two collections, with tokens verified with JWT_SECRET. */
export const tenantServer: ServerVariant = {
  name: 'service, tenants',
  entry: 'server.ts',
  env: { ADMIN_TOKEN, COLLECTIONS: COLLECTIONS_FILE, JWT_SECRET, JWT_DEFAULT_TIER: TIER },
  readyPath: '/readyz',
  prepare: async ({ sql }, log) => {
    await ensureTenantOrders(sql, log);
    writeFileSync(COLLECTIONS_FILE, collectionsFile());
    return async () => rmSync(COLLECTIONS_FILE, { force: true });
  },
  setup: async (origin) => {
    await admin(origin, 'PUT', `/admin/tiers/${TIER}`, { limit: 1_000_000_000, windowSeconds: 60, concurrency: 1_000 });
  },
};

/** A call of the operator API (docs/reference/api.md, "Operator API"), as an operator would make it. */
async function admin(origin: string, method: string, path: string, body: unknown): Promise<unknown> {
  const response = await fetch(`${origin}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${await response.text()}`);
  return response.json();
}

/** Calls of the operator API at once while keys are made: a few, so the server's pool is kept busy but not queued. */
const MAKING = 8;

/** One key a tenant, tenant 1 first, made through POST /admin/keys; with `claims`, each carries `{ tenant: N }`. */
async function makeKeys(origin: string, claims: boolean): Promise<string[]> {
  const keys: string[] = new Array(TENANTS);
  let next = 0;
  const maker = async () => {
    while (next < TENANTS) {
      const i = next++;
      const body = { tier: TIER, name: `bench tenant ${i + 1}`, ...(claims ? { claims: { tenant: i + 1 } } : {}) };
      keys[i] = ((await admin(origin, 'POST', '/admin/keys', body)) as { key: string }).key;
    }
  };
  await Promise.all(Array.from({ length: MAKING }, maker));
  return keys;
}

/** The keys of a server, made once per server and kind, however many rounds ask for them. */
const made = new Map<string, Promise<string[]>>();

function keysOf(origin: string, claims: boolean): Promise<string[]> {
  const id = `${origin} ${claims}`;
  let keys = made.get(id);
  if (keys === undefined) {
    keys = makeKeys(origin, claims);
    made.set(id, keys);
    // A failure is the round's; the next round tries again.
    keys.catch(() => made.delete(id));
  }
  return keys;
}

/**
 * One HS256 token a tenant, as an identity provider signs them: issuer, subject, expiry a day on, the claim
 * `tenant`. Made once, so that a later round sends the tokens the server has verified before, as a client reusing
 * its token does.
 */
let signed: string[] | undefined;
function tokens(): string[] {
  signed ??= sign();
  return signed;
}

function sign(): string[] {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const header = part({ alg: 'HS256', typ: 'JWT' });
  const exp = Math.floor(Date.now() / 1000) + 86_400;
  return Array.from({ length: TENANTS }, (_, i) => {
    const body = `${header}.${part({ iss: 'bench', sub: `tenant-${i + 1}`, tenant: i + 1, exp })}`;
    return `${body}.${createHmac('sha256', JWT_SECRET).update(body).digest('base64url')}`;
  });
}

/**
 * Each request the next tenant in turn, with its credential, from another `since_id` each time (a tenant's orders
 * spread over the ids, so any below 900,000 leaves a whole chunk): no two requests in flight read the same rows,
 * so none shares a read (lib/pagination/shared-reads.ts), and every credential is used from every connection.
 */
function tenantChunks(pathOf: (tenant: number) => string, credentials: string[]): autocannon.Request[] {
  const headers = credentials.map((credential) => ({ authorization: `Bearer ${credential}` }));
  let next = randomBytes(3).readUIntBE(0, 3);
  return [
    {
      method: 'GET',
      path: pathOf(1),
      setupRequest: (request) => {
        const n = next++;
        const tenant = n % TENANTS;
        return { ...request, path: `${pathOf(tenant + 1)}since_id=${(n * 7_919) % 900_000}`, headers: headers[tenant] };
      },
    },
  ];
}

const PREFIX = `tenant's chunk, ${CLIENTS} clients, another chunk each`;
const FILTER = `${PREFIX}: filter, key`;
const RULE_KEY = `${PREFIX}: row rule, key with claims`;
const RULE_TOKEN = `${PREFIX}: row rule, HS256 token`;

const byFilter = (tenant: number) => `/v1/orders?tenant_id=${tenant}&`;
const byRule = () => '/v1/my_orders?';

export const tenantScenarios: Scenario[] = [
  {
    name: FILTER,
    server: tenantServer.name,
    connections: CLIENTS,
    setup: async ({ origin }: ScenarioContext) => ({ requests: tenantChunks(byFilter, await keysOf(origin, false)) }),
  },
  {
    name: RULE_KEY,
    server: tenantServer.name,
    connections: CLIENTS,
    setup: async ({ origin }: ScenarioContext) => ({ requests: tenantChunks(byRule, await keysOf(origin, true)) }),
  },
  {
    name: RULE_TOKEN,
    server: tenantServer.name,
    connections: CLIENTS,
    setup: async () => ({ requests: tenantChunks(byRule, tokens()) }),
  },
];

/** A row rule and a token cost what a filter and a key cost: each rule row at least 0.95 of the filter row's rate. */
export const tenantComparisons: Comparison[] = [
  { label: 'row rule, key with claims / filter, key', of: RULE_KEY, to: FILTER, target: { measure: 'req/s', atLeast: 0.95 } },
  { label: 'row rule, HS256 token / filter, key', of: RULE_TOKEN, to: FILTER, target: { measure: 'req/s', atLeast: 0.95 } },
  // Measured, held to no target: the token beside the key, both through the rule.
  { label: 'row rule, HS256 token / key with claims', of: RULE_TOKEN, to: RULE_KEY },
];
