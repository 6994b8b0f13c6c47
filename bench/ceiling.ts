// `npm run bench -- --ceiling`: decisions per second of one PostgreSQL, and its CPU per decision, against
// the number of subjects, with and without the concurrency cap, in batches as the limiter sends them
// (docs/explanation/scaling.md). Nothing but the database runs: the statements are lib/ratelimit/limiter.ts's own.
import { createHash } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres, { type Sql } from 'postgres';
import { runMigrations } from '../db/migrate.ts';
import { cpuBetween, parentOf, postmasterOf, snapshot } from './cpu.ts';

export interface CeilingOptions {
  /** Seconds measured per cell. */
  readonly duration: number;
  /** Seconds of unmeasured load before each cell's measurement. */
  readonly warmup: number;
  /** Database connections, each an instance's limiter connection (two statements in flight on each). */
  readonly connections: number;
  readonly subjects: readonly number[];
  readonly batches: readonly number[];
  readonly signal?: AbortSignal;
}

interface Cell {
  readonly subjects: number;
  readonly cap: boolean;
  readonly batch: number;
}

interface CellResult extends Cell {
  readonly decisionsPerSec: number;
  readonly statementsPerSec: number;
  /** CPU of the PostgreSQL backends of the cell's connections per decision, µs; undefined on another host. */
  readonly postgresCpu: number | undefined;
  /** CPU of this process (the driver) per decision, µs. */
  readonly driverCpu: number;
  /** Decisions answered other than `ok`: none is expected (the tier never declines). */
  readonly notOk: number;
}

/** As the limiter's statements are in flight on its one connection (lib/ratelimit/limiter.ts, PIPELINE_DEPTH). */
const PIPELINE_DEPTH = 2;
/** The service's lease time-to-live (lib/ratelimit/gate.ts). */
const LEASE_TTL = 30;
const TIER = 'ceiling';

/** Subject i's key hash (hex, as the limiter sends it: a SHA-256, as of a real key) and its client's address. */
interface Keys {
  readonly hashes: readonly string[];
  readonly addresses: readonly string[];
}

function makeKeys(count: number): Keys {
  const ids = Array.from({ length: count }, (_, i) => i);
  return {
    hashes: ids.map((i) => createHash('sha256').update(`ceiling-${i}`).digest('hex')),
    addresses: ids.map((i) => `ip:10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`),
  };
}

/** As lib/ratelimit/limiter.ts writes its arrays: text literals, cast in SQL. */
function arrayLiteral(values: readonly (string | number)[]): string {
  return `{${values.map((value) => (typeof value === 'number' ? String(value) : `"${value}"`)).join(',')}}`;
}

function isLocalHost(url: string): boolean {
  return ['', 'localhost', '127.0.0.1', '[::1]'].includes(new URL(url).hostname);
}

/** A lease to give back with a later statement, as the limiter does. */
interface Lease {
  readonly subject: string;
  readonly slot: number;
  readonly token: string;
}

/** The limiter's statement: `batch` decisions, carrying the releases owed (lib/ratelimit/limiter.ts, send). */
function decide(sql: Sql, keys: Keys, subjects: number[], leaseTtl: number, releases: Lease[]) {
  const zeros = arrayLiteral(releases.map(() => 0));
  return sql`
      select * from paginated_collections.rate_decide(
        ${arrayLiteral(subjects.map((i) => keys.hashes[i]!))}::text[],
        ${arrayLiteral(subjects.map((i) => keys.addresses[i]!))}::text[], ${arrayLiteral(subjects.map(() => 'anonymous'))}::text[],
        ${arrayLiteral(subjects.map(() => 1))}::int[], ${arrayLiteral(subjects.map(() => 0))}::float8[],
        ${leaseTtl}, ${arrayLiteral(releases.map((lease) => lease.subject))}::text[], ${arrayLiteral(releases.map((lease) => lease.slot))}::int[],
        ${arrayLiteral(releases.map((lease) => lease.token))}::bigint[], ${zeros}::int[], ${zeros}::bigint[])`;
}

function release(sql: Sql, releases: Lease[]) {
  const zeros = arrayLiteral(releases.map(() => 0));
  return sql`select paginated_collections.rate_release(${arrayLiteral(releases.map((lease) => lease.subject))}::text[],
    ${arrayLiteral(releases.map((lease) => lease.slot))}::int[], ${arrayLiteral(releases.map((lease) => lease.token))}::bigint[],
    ${zeros}::int[], ${zeros}::bigint[])`;
}

/** Counts shared by a cell's loops, read at the start and end of its measurement. */
interface Counters {
  decisions: number;
  statements: number;
  notOk: number;
}

/**
 * One connection's load until `stopped()`: PIPELINE_DEPTH loops, each sending a statement of `batch`
 * decisions on random subjects as soon as its last one answered; with the cap, each statement carries the
 * releases of the leases taken by those that answered before it, and the last ones are released at the end.
 */
async function load(sql: Sql, keys: Keys, cell: Cell, counters: Counters, stopped: () => boolean): Promise<void> {
  let owed: Lease[] = [];
  const loop = async () => {
    while (!stopped()) {
      const subjects = Array.from({ length: cell.batch }, () => Math.floor(Math.random() * cell.subjects));
      const releases = owed;
      owed = [];
      const rows = await decide(sql, keys, subjects, cell.cap ? LEASE_TTL : 0, releases);
      counters.statements++;
      counters.decisions += rows.length;
      for (const row of rows) {
        if (row.outcome !== 'ok') counters.notOk++;
        if (row.lease_slot !== null) owed.push({ subject: row.subject, slot: row.lease_slot, token: String(row.lease_token) });
      }
    }
  };
  await Promise.all(Array.from({ length: PIPELINE_DEPTH }, loop));
  if (owed.length > 0) await release(sql, owed);
}

async function measureCell(url: string, keys: Keys, cell: Cell, options: CeilingOptions): Promise<CellResult> {
  const clients = Array.from({ length: options.connections }, () =>
    postgres(url, {
      max: 1,
      fetch_types: false,
      onnotice: () => {},
      types: { int8: { to: 20, from: [20], serialize: (n: number) => String(n), parse: (text: string) => Number(text) } },
    }),
  );
  try {
    const pids = await Promise.all(clients.map(async (sql) => (await sql`select pg_backend_pid() as pid`)[0]!.pid as number));
    // A server on another host or in a container: its backends' pids here would be other processes, or none.
    // Only backends of the cluster of `url` count (children of its postmaster, never another cluster's).
    const postmaster = isLocalHost(url) ? await postmasterOf(clients[0]!) : undefined;
    const local = postmaster !== undefined && pids.every((pid) => parentOf(pid) === postmaster);
    const counters: Counters = { decisions: 0, statements: 0, notOk: 0 };
    let stop = false;
    let failure: unknown;
    // A load that fails (the database dropped on Ctrl-C, or away) stops the others; the cell reports it.
    const loads = Promise.all(clients.map((sql) => load(sql, keys, cell, counters, () => stop))).catch((error: unknown) => {
      failure = error;
      stop = true;
    });
    try {
      await sleep(options.warmup * 1000, undefined, { signal: options.signal });
      const start = { ...counters, at: performance.now(), cpu: snapshot(pids), driver: process.cpuUsage() };
      await sleep(options.duration * 1000, undefined, { signal: options.signal });
      if (failure !== undefined) throw failure;
      const seconds = (performance.now() - start.at) / 1000;
      const postgresMicros = local ? cpuBetween(start.cpu, snapshot(pids)) : undefined;
      const driver = process.cpuUsage(start.driver);
      const decisions = counters.decisions - start.decisions;
      return {
        ...cell,
        decisionsPerSec: decisions / seconds,
        statementsPerSec: (counters.statements - start.statements) / seconds,
        postgresCpu: postgresMicros === undefined ? undefined : postgresMicros / decisions,
        driverCpu: (driver.user + driver.system) / decisions,
        notOk: counters.notOk,
      };
    } finally {
      stop = true;
      await loads;
    }
  } finally {
    await Promise.all(clients.map((sql) => sql.end({ timeout: 5 })));
  }
}

/** Keys 0 … count-1 on a tier that never declines (the ceiling is the work of admitting), their rows made. */
async function setUp(sql: Sql, keys: Keys): Promise<void> {
  const count = keys.hashes.length;
  await sql`insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency) values (${TIER}, 2000000000, 60, 1000)`;
  for (let first = 0; first < count; first += 10_000) {
    const ids = Array.from({ length: Math.min(10_000, count - first) }, (_, i) => first + i);
    await sql`
      insert into paginated_collections.api_keys (id, key_hash, prefix, tier)
      select 'key_ceiling_' || i, decode(h, 'hex'), 'pck_ceil', ${TIER}
      from unnest(${ids}::int[], ${ids.map((i) => keys.hashes[i]!)}::text[]) as k(i, h)`;
  }
  // Every subject's row exists, as for clients seen before: the cells measure decisions, not first requests.
  await sql`
    insert into paginated_collections.rate_windows (subject, last_start, used, expires, units, lease_seq, lease_tokens, lease_expires, quiet_at)
    select 'key:' || id, 0, 0, '{}', '{}', 0, '{}', '{}', 0 from paginated_collections.api_keys where tier = ${TIER}`;
  await sql`vacuum (analyze) paginated_collections.rate_windows, paginated_collections.api_keys, paginated_collections.rate_tiers`;
}

const whole = (n: number) => Math.round(n).toLocaleString('en');

function formatCeiling(results: CellResult[], options: CeilingOptions, loads: readonly [number, number]): string {
  const header = [
    'subjects',
    'cap',
    'batch',
    'decisions/s',
    'statements/s',
    'pg µs/decision',
    'driver µs/decision',
    'per pg core/s',
    'not ok',
  ];
  const rows = results.map((r) => [
    whole(r.subjects),
    r.cap ? 'on' : 'off',
    String(r.batch),
    whole(r.decisionsPerSec),
    whole(r.statementsPerSec),
    r.postgresCpu?.toFixed(1) ?? 'n/a',
    r.driverCpu.toFixed(1),
    r.postgresCpu === undefined ? 'n/a' : whole(1e6 / r.postgresCpu),
    String(r.notOk),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i < 3 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [
    `Ceiling: rate_decide on one PostgreSQL, ${options.connections} connections with ${PIPELINE_DEPTH} statements in flight on each,`,
    `${options.duration} s measured per cell after ${options.warmup} s; random subjects (API keys) per decision; cap on: every`,
    `decision takes a lease (TTL ${LEASE_TTL} s) released by the connection's next statement. pg µs: CPU of the cells' backends`,
    '(/proc); per pg core/s: 1,000,000 / pg µs, what one core of PostgreSQL decides. Driver: this process.',
    // A loaded machine stretches the CPU time of the same work: read the figures with its load.
    `This machine: ${cpus().length} cores, load average ${loads[0].toFixed(1)} before the cells, ${loads[1].toFixed(1)} after.`,
    '',
    line(header),
    `|${widths.map((w, i) => (i < 3 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...rows.map(line),
  ].join('\n');
}

/** A fresh, migrated database on `serverUrl`'s server for the cells; `drop` removes it, connections and all. */
export async function ceilingDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bench_ceiling_${process.pid}`;
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  const drop = async () => {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  };
  try {
    await admin.unsafe(`create database ${name}`);
    await runMigrations(url.toString());
  } catch (error) {
    await drop();
    throw error;
  }
  return { url: url.toString(), drop };
}

/** Every cell measured in the ceiling database at `url` (ceilingDatabase); returns the table. */
export async function runCeiling(url: string, options: CeilingOptions, log: (line: string) => void): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  const results: CellResult[] = [];
  const before = loadavg()[0]!;
  try {
    const most = Math.max(...options.subjects);
    log(`Ceiling: ${most.toLocaleString('en')} keys into ${new URL(url).pathname.slice(1)}`);
    const keys = makeKeys(most);
    await setUp(sql, keys);
    for (const subjects of options.subjects) {
      for (const cap of [false, true]) {
        for (const batch of options.batches) {
          if (options.signal?.aborted) break;
          await sql`vacuum paginated_collections.rate_windows`;
          const cell = { subjects, cap, batch };
          const result = await measureCell(url, keys, cell, options);
          log(`  ${subjects} subjects, cap ${cap ? 'on' : 'off'}, batch ${batch}: ${whole(result.decisionsPerSec)} decisions/s`);
          results.push(result);
        }
      }
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
  return formatCeiling(results, options, [before, loadavg()[0]!]);
}
