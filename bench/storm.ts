// A storm against a real server (docs/explanation/budgets.md, "The storms it stops"): three free keys send one request
// from 8 connections each without pause, ignoring 429s, from a process of their own (bench/storm-attacker.ts),
// while a fourth key, on a tier that never declines, reads chunks one at a time. Run by `npm run bench` (its
// storm rows) and by bench/storm-cost.ts.
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { runMigrations } from '../db/migrate.ts';
import { migrateDemo } from '../demo/migrate.ts';
import { stopProcess } from '../tests/helpers/processes.ts';
import { runtimeCommand } from '../tests/helpers/servers.ts';
import { sleep, waitFor } from '../tests/helpers/wait.ts';
import { cpuBetween, postmasterOf, snapshot } from './cpu.ts';
import { backendPids } from './measure.ts';
import { benchPort } from './processes.ts';
import { markdown, type Threshold } from './table.ts';

export interface StormOptions {
  databaseUrl: string;
  /** The service's directory: its server.ts is started. */
  dir: string;
  /** Seconds of the storm, at most a window of the free tier: what each key is served falls in one window. */
  seconds: number;
  /** Seconds the fourth client is measured alone first. */
  calmSeconds: number;
  /** What the storm keys send. */
  query: string;
  /** What the fourth client reads, following next links; undefined: `/v1/products?count=none` every 50 ms. */
  follow: string | undefined;
  /** A filter parameter each storm request gives a new value that selects every row: no two share a statement. */
  vary: string | undefined;
  /** Keeps the server's log file and returns its path. */
  keepLog?: boolean;
  log: (line: string) => void;
}

/** The fourth client's requests: their latencies (ms) and statuses. */
export interface Victim {
  latencies: number[];
  statuses: Record<number, number>;
  /**
   * The same requests by the server's request log (`durationMs`, from the request reaching the app to its
   * response): what of the latency was the server's, not the sockets', nor the measuring process's wait for a core.
   */
  served?: number[];
}

/** A storm key: what it was answered, and what the server's request log says its requests ran and were charged. */
interface StormKey {
  name: string;
  statuses: Record<number, number>;
  /** Milliseconds its statements ran on PostgreSQL by the server's clock, each request its statement's whole time: what it was charged for. */
  pgMs: number;
  /** The same with a statement that n requests shared counted a nth to each: its share of PostgreSQL's time. */
  pgShareMs: number;
  charged: number;
  requests: number;
}

export interface StormResult {
  /** The free tier's allowance a window, and the window: what a storm key's time is held to. */
  allowance: number;
  windowSeconds: number;
  seconds: number;
  calm: Victim;
  /** The storm request sent alone by the fourth key, and PostgreSQL's CPU for each, in µs. */
  alone: Victim;
  aloneMicros: number;
  during: Victim;
  keys: StormKey[];
  /** CPU in µs over the storm: the server's PostgreSQL backends, the server process, the storm's own process. */
  cpu: { postgres: number; server: number; attackers: number };
  /** /readyz's answers during the storm. */
  readyz: Record<number, number>;
  logFile: string | undefined;
}

/** The value at quantile `q` of `values`. */
export function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? Number.NaN;
}

/** Milliseconds of PostgreSQL a minute that a key's `ms` over `seconds` come to, per unit of `allowance` a window of `windowSeconds`. */
export function msPerUnit(ms: number, seconds: number, allowance: number, windowSeconds: number): number {
  return ((ms / seconds) * windowSeconds) / allowance;
}

export async function runStorm(options: StormOptions): Promise<StormResult> {
  const { databaseUrl, seconds, log } = options;
  const port = await benchPort();
  const base = `http://127.0.0.1:${port}`;
  const cheap = '/v1/products?count=none';
  /** Seconds of the storm request sent one at a time by the fourth key, to read PostgreSQL's time per request. */
  const calibrationSeconds = 5;

  // The database as the service will find it: migrated (an earlier release's upgraded in place), the demo's
  // tables in their schema.
  await runMigrations(databaseUrl);
  await migrateDemo(databaseUrl);
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const resources: (() => Promise<unknown>)[] = [() => sql.end()];
  try {
    // The CPU read is of this cluster's backends only; none when the cluster is not on this host.
    const postmaster = await postmasterOf(sql);
    if (postmaster === undefined) log('No process of the database cluster found on this host: its CPU reads 0');
    // Fresh keys each run: forget the registrations and windows of earlier runs (the bench's own database).
    await sql`delete from paginated_collections.rate_windows`;
    await sql`delete from paginated_collections.api_keys where name like 'storm-%'`;
    await sql`
      insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency) values ('storm-victim', 1000000000, 60, 1000)
      on conflict (name) do update set allowance = excluded.allowance, concurrency = excluded.concurrency`;
    const [free] = await sql<{ allowance: number; windowSeconds: number }[]>`
      select allowance, window_seconds as "windowSeconds" from paginated_collections.rate_tiers where name = 'free'`;
    if (free === undefined) throw new Error('No free tier in the database');

    // The server's request log goes to a file, read once the storm is over: parsed as it came (thousands of
    // lines a second of 429s), it would take the measuring process's event loop from the fourth client,
    // whose latency it measures.
    const logDir = await mkdtemp(path.join(tmpdir(), 'storm-'));
    const logFile = path.join(logDir, 'server.log');
    if (!options.keepLog) resources.push(() => rm(logDir, { recursive: true, force: true }));
    const logFd = openSync(logFile, 'w');
    const [command, args] = runtimeCommand('node', 'server.ts');
    const server = spawn(command, args, {
      cwd: options.dir,
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: databaseUrl,
        COLLECTIONS: 'demo',
        PORT: String(port),
        // The storm without holds, to see what they change: LIMITER_HOLD_MS=0 in the bench's own environment.
        ...(process.env.LIMITER_HOLD_MS === undefined ? {} : { LIMITER_HOLD_MS: process.env.LIMITER_HOLD_MS }),
      },
      stdio: ['ignore', logFd, 'inherit'],
    });
    closeSync(logFd);
    resources.unshift(() => stopProcess(server));
    await waitFor('the server ready', async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200, {
      timeoutMs: 60_000,
    });

    /** A new key: its secret, and the subject the limiter and the log name it by. */
    const register = async (name: string) => {
      const res = await fetch(`${base}/v1/keys`, { method: 'POST', body: JSON.stringify({ name }) });
      if (res.status !== 201) throw new Error(`register: ${res.status} ${await res.text()}`);
      const { key, id } = (await res.json()) as { key: string; id: string };
      return { key, subject: `key:${id}` };
    };
    const { key: victimKey, subject: victimSubject } = await register('storm-victim');
    // The limiter reads a key's tier at every decision: the victim's own allowance never paces it.
    await sql`update paginated_collections.api_keys set tier = 'storm-victim' where name = 'storm-victim'`;
    const stormers = [await register('storm-1'), await register('storm-2'), await register('storm-3')];

    /** CPU over `body`, in µs: the server's PostgreSQL backends (not parallel workers), and the server process. */
    const cpuOver = async <T>(body: () => Promise<T>): Promise<[T, number, number]> => {
      const pids = async () => backendPids(sql, postmaster, server.pid!);
      const before = snapshot(await pids());
      const serverBefore = snapshot([server.pid!]);
      const result = await body();
      return [result, cpuBetween(before, snapshot(await pids())), cpuBetween(serverBefore, snapshot([server.pid!]))];
    };

    /** The fourth client for `ms`: one request at a time; `storm` is the storm request, sent to calibrate. */
    const victim = async (ms: number, storm?: string): Promise<Victim> => {
      const latencies: number[] = [];
      const statuses: Record<number, number> = {};
      const end = performance.now() + ms;
      let next = storm ?? options.follow ?? cheap;
      while (performance.now() < end) {
        const started = performance.now();
        const res = await fetch(`${base}${next}`, { headers: { authorization: `Bearer ${victimKey}` } });
        const body = await res.text();
        latencies.push(performance.now() - started);
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        if (storm === undefined && options.follow !== undefined) {
          const href = res.ok ? (JSON.parse(body) as { _links?: { next?: { href: string } } })._links?.next?.href : undefined;
          next = href ? new URL(href).pathname + new URL(href).search : options.follow;
        } else if (storm === undefined) await sleep(50);
      }
      return { latencies, statuses };
    };

    const readyz = async (ms: number): Promise<Record<number, number>> => {
      const statuses: Record<number, number> = {};
      const end = performance.now() + ms;
      while (performance.now() < end) {
        const res = await fetch(`${base}/readyz`);
        await res.arrayBuffer();
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        await sleep(500);
      }
      return statuses;
    };

    log(`  the fourth client alone for ${options.calmSeconds} s`);
    const calmStarted = Date.now();
    const [calm] = await cpuOver(() => victim(options.calmSeconds * 1000));
    const calmEnded = Date.now();
    // What one storm request costs PostgreSQL when it runs alone, sent by the fourth key (whose tier never declines).
    const [alone, aloneMicros] = await cpuOver(() => victim(calibrationSeconds * 1000, options.query));

    log(`  the storm for ${seconds} s`);
    const storm = spawn(
      process.execPath,
      ['bench/storm-attacker.ts', base, options.query, '8', String(seconds), ...stormers.map((s) => s.key)],
      {
        cwd: `${import.meta.dirname}/..`,
        env: options.vary === undefined ? process.env : { ...process.env, VARY: options.vary },
        // stdin: a pipe that closes with this process, which the storm takes as its end (bench/storm-attacker.ts).
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    let printed = '';
    await new Promise<void>((resolve) =>
      storm.stdout!.on('data', (chunk: Buffer) => {
        printed += chunk.toString();
        if (printed.startsWith('started\n')) resolve();
      }),
    );
    // 'close': its stdout read to the end.
    const stormExit = new Promise((resolve) => storm.once('close', resolve));
    // The storm stops with the fourth client's measurement, if it has not yet: run on past its tier's window,
    // it would be served a second allowance.
    const stormStarted = Date.now();
    const measured = victim(seconds * 1000).then((result) => {
      storm.kill('SIGTERM');
      return result;
    });
    const [[during, ready], postgresMicros, serverMicros] = await cpuOver(() => Promise.all([measured, readyz(seconds * 1000)]));
    await stormExit;
    // The last lines: the log's buffer is flushed every 100 ms (lib/http/logger.ts).
    await sleep(500);
    const stormEnded = Date.now();
    const logLines = (await readFile(logFile, 'utf8')).split('\n');
    const logged = loggedBetween(logLines, stormStarted, stormEnded);
    calm.served = servedBetween(logLines, victimSubject, calmStarted, calmEnded);
    during.served = servedBetween(logLines, victimSubject, stormStarted, stormEnded);
    const { served, cpuMicros } = JSON.parse(printed.slice('started\n'.length)) as {
      served: Record<string, Record<number, number>>;
      cpuMicros: number;
    };
    const keys = stormers.map(({ subject }, i) => ({
      name: `key${i + 1}`,
      statuses: served[`key${i + 1}`] ?? {},
      ...(logged.get(subject) ?? { pgMs: 0, pgShareMs: 0, charged: 0, requests: 0 }),
    }));
    return {
      allowance: free.allowance,
      windowSeconds: free.windowSeconds,
      seconds,
      calm,
      alone,
      aloneMicros,
      during,
      keys,
      cpu: { postgres: postgresMicros, server: serverMicros, attackers: cpuMicros },
      readyz: ready,
      logFile: options.keepLog ? logFile : undefined,
    };
  } finally {
    for (const release of resources) await release().catch(() => {});
  }
}

/**
 * What the server's request log says each subject's statements ran on PostgreSQL (`pgMs`, and its share
 * `pgShareMs` where the request shared a statement) and was charged in the end (`charged`), for the requests
 * logged from `from` to `to` (epoch ms): a request the service cuts short (a 429 Query_limit_exceeded) ran too.
 */
function loggedBetween(lines: string[], from: number, to: number): Map<string, Omit<StormKey, 'name' | 'statuses'>> {
  const logged = new Map<string, Omit<StormKey, 'name' | 'statuses'>>();
  for (const line of lines) {
    if (!line.includes('"subject"')) continue;
    const { subject, pgMs, pgShareMs, charged, time } = JSON.parse(line) as {
      subject?: string;
      pgMs?: number;
      pgShareMs?: number;
      charged?: number;
      time: number;
    };
    if (subject === undefined || time < from || time > to) continue;
    const sum = logged.get(subject) ?? { pgMs: 0, pgShareMs: 0, charged: 0, requests: 0 };
    sum.pgMs += pgMs ?? 0;
    sum.pgShareMs += pgShareMs ?? pgMs ?? 0;
    sum.charged += charged ?? 0;
    sum.requests += 1;
    logged.set(subject, sum);
  }
  return logged;
}

/** The `durationMs` of `subject`'s requests logged from `from` to `to` (epoch ms): the server's own time for each. */
function servedBetween(lines: string[], subject: string, from: number, to: number): number[] {
  const durations: number[] = [];
  for (const line of lines) {
    if (!line.includes(subject)) continue;
    const entry = JSON.parse(line) as { subject?: string; durationMs?: number; time: number };
    if (entry.subject === subject && entry.durationMs !== undefined && entry.time >= from && entry.time <= to)
      durations.push(entry.durationMs);
  }
  return durations;
}

/** The storms `npm run bench` runs after its rows, each against a server of its own, and the targets they are held to. */
export interface StormRow {
  name: string;
  query: string;
  follow: string;
  vary?: string;
  /** Held to: each storm key's PostgreSQL time at most 2 ms a unit of its allowance, the fourth client's p99 within 2× of its own alone. */
  targets?: boolean;
}

/** The trap (docs/explanation/budgets.md, "Statement budgets"): priced 1 unit, it walks the whole `name` index. */
const TRAP = '/v1/products?sort=name&category=books&category[in]=games&count=none';
const CURSOR_CHUNKS = '/v1/products?page-size=20&sort=id';

export const stormRows: StormRow[] = [
  { name: 'count storm', query: '/v1/products', follow: CURSOR_CHUNKS, targets: true },
  { name: 'planner trap', query: TRAP, follow: CURSOR_CHUNKS, targets: true },
  { name: 'planner trap, each request its own statement', query: TRAP, follow: CURSOR_CHUNKS, vary: 'priceCents[gte]' },
];

const STORM_HEADER = [
  'storm',
  'alone p50 / p99 ms',
  'storm p50 / p99 ms',
  'p99 × alone',
  'server: alone p50 / p99 ms',
  'server: storm p50 / p99 ms',
  "storm keys' 429/s",
  'pg ms/unit',
  'charged-for ms/unit',
  'units charged/min',
];

/** The most of the three storm keys' PostgreSQL time a minute per unit of their allowance: their own share (`pgShareMs`), or what they were charged for (`pgMs`). */
function worstKey(result: StormResult, field: 'pgMs' | 'pgShareMs'): number {
  return Math.max(...result.keys.map((key) => msPerUnit(key[field], result.seconds, result.allowance, result.windowSeconds)));
}

const p99Ratio = (result: StormResult) => quantile(result.during.latencies, 0.99) / quantile(result.calm.latencies, 0.99);

/** The storms' table, and their figures held to targets. */
export function formatStorms(results: [StormRow, StormResult | Error][]): { table: string; thresholds: Threshold[] } {
  const latency = (latencies: number[] | undefined) =>
    latencies === undefined || latencies.length === 0
      ? ''
      : `${quantile(latencies, 0.5).toFixed(1)} / ${quantile(latencies, 0.99).toFixed(1)}`;
  const body = results.map(([row, result]) => {
    if (result instanceof Error) return [row.name, `failed: ${result.message.split('\n')[0]}`, ...STORM_HEADER.slice(2).map(() => '')];
    const declined = result.keys.reduce((sum, key) => sum + (key.statuses[429] ?? 0), 0) / result.seconds;
    return [
      row.name,
      latency(result.calm.latencies),
      latency(result.during.latencies),
      p99Ratio(result).toFixed(2),
      latency(result.calm.served),
      latency(result.during.served),
      Math.round(declined).toLocaleString('en'),
      worstKey(result, 'pgShareMs').toFixed(2),
      worstKey(result, 'pgMs').toFixed(2),
      Math.round(Math.max(...result.keys.map((key) => (key.charged / result.seconds) * 60))).toLocaleString('en'),
    ];
  });
  const thresholds = results.flatMap(([row, result]): Threshold[] =>
    row.targets && !(result instanceof Error)
      ? [
          {
            label: `${row.name}: each storm key's PostgreSQL time a minute per unit of its allowance, the most of the three`,
            value: worstKey(result, 'pgShareMs'),
            unit: 'ms',
            atMost: 2,
          },
          { label: `${row.name}: the fourth client's p99 during the storm / alone`, value: p99Ratio(result), unit: '×', atMost: 2 },
        ]
      : [],
  );
  return { table: markdown(STORM_HEADER, body, (column) => column === 3 || column >= 6), thresholds };
}
