// `node bench/storm-cost.ts <database url> [service dir] [seconds] [--query PATH] [--follow PATH] [--calm S] [--vary PARAM]`:
// a storm against a real server (docs/rate-limit.md, "The storm it stops"). Three free keys send `--query`
// (default issue 11's deep offset, `sort=-priceCents,name&offset=999000&count=none`) from 8 connections each,
// ignoring 429s (a hostile client), with `--vary PARAM` each request its own statement (bench/storm-attacker.ts,
// VARY); a fourth key, on a tier that never declines, sends one cheap chunk every
// 50 ms, or with `--follow PATH` reads PATH's chunks one at a time without pause, following next links.
// Prints that client's latency alone and during the storm, what the storm keys were served, the PostgreSQL
// time each storm key got per minute, and /readyz. Not part of the tests.
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { runMigrations } from '../db/migrate.ts';
import { migrateDemo } from '../demo/migrate.ts';
import { stopProcess } from '../tests/helpers/processes.ts';
import { sleep, waitFor } from '../tests/helpers/wait.ts';
import { cpuBetween, postmasterOf, snapshot } from './cpu.ts';
import { backendPids } from './measure.ts';
import { benchPort } from './processes.ts';

const USAGE =
  'Usage: node bench/storm-cost.ts <database url> [service dir] [seconds] [--query PATH] [--follow PATH] [--calm S] [--vary PARAM]';
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { query: { type: 'string' }, follow: { type: 'string' }, calm: { type: 'string' }, vary: { type: 'string' } },
});
const [databaseUrl, dir = process.cwd(), secondsText = '30'] = positionals;
if (!databaseUrl) throw new Error(USAGE);
const seconds = Number(secondsText);
const calmSeconds = Number(values.calm ?? '5');
const port = await benchPort();
const base = `http://127.0.0.1:${port}`;
const STORM = values.query ?? process.env.STORM ?? '/v1/products?sort=-priceCents,name&offset=999000&count=none';
const CHEAP = '/v1/products?count=none';
/** A free key's allowance: what a storm key's PostgreSQL time per minute is held to, a unit being about a millisecond. */
const FREE_UNITS_PER_MINUTE = 600;
/** Seconds of the storm request sent one at a time by the fourth key, to read PostgreSQL's time per request. */
const CALIBRATION_SECONDS = 5;

// The database as the service will find it: migrated (an earlier release's upgraded in place), the demo's tables
// in their schema, before the keys and windows of earlier runs are forgotten.
await runMigrations(databaseUrl);
await migrateDemo(databaseUrl);
// Fresh keys each run: forget the registrations and windows of earlier runs (the bench's own database).
const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
// The CPU read is of this cluster's backends only; none when the cluster is not on this host.
const postmaster = await postmasterOf(sql);
if (postmaster === undefined) console.error('No process of the database cluster found on this host: its CPU reads 0');
await sql`delete from paginated_collections.rate_windows`;
await sql`delete from paginated_collections.api_keys where name like 'storm-%'`;
await sql`
  insert into paginated_collections.rate_tiers (name, allowance, window_seconds, concurrency) values ('storm-victim', 1000000000, 60, 1000)
  on conflict (name) do update set allowance = excluded.allowance, concurrency = excluded.concurrency`;

// The server's request log goes to a file, read once the storm is over: parsed as it came (some 8,000 lines a second
// of 429s), it would take the measuring process's event loop from the fourth client, whose latency it measures.
const logDir = await mkdtemp(path.join(tmpdir(), 'storm-cost-'));
const logFile = path.join(logDir, 'server.log');
const logFd = openSync(logFile, 'w');
const server = spawn(process.execPath, ['server.ts'], {
  cwd: dir,
  env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, COLLECTIONS: 'demo', PORT: String(port) },
  stdio: ['ignore', logFd, 'inherit'],
});
closeSync(logFd);
await waitFor('the server ready', async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200, {
  timeoutMs: 60_000,
});

/**
 * What the server's request log says each subject's statements ran on PostgreSQL (its `pgMs`, by the server's
 * clock) and was charged in the end (`charged`), for the requests logged from `from` to `to` (epoch ms): the storm
 * keys' real PostgreSQL time, which a request the service cuts short (a 429 Query_limit_exceeded) uses too.
 */
async function loggedBetween(from: number, to: number): Promise<Map<string, { pgMs: number; charged: number; requests: number }>> {
  const logged = new Map<string, { pgMs: number; charged: number; requests: number }>();
  for (const line of (await readFile(logFile, 'utf8')).split('\n')) {
    if (!line.includes('"subject"')) continue;
    const { subject, pgMs, charged, time } = JSON.parse(line) as { subject?: string; pgMs?: number; charged?: number; time: number };
    if (subject === undefined || time < from || time > to) continue;
    const sum = logged.get(subject) ?? { pgMs: 0, charged: 0, requests: 0 };
    sum.pgMs += pgMs ?? 0;
    sum.charged += charged ?? 0;
    sum.requests += 1;
    logged.set(subject, sum);
  }
  return logged;
}

/** A new key: its secret, and the subject the limiter and the log name it by. */
async function register(name: string): Promise<{ key: string; subject: string }> {
  const res = await fetch(`${base}/v1/keys`, { method: 'POST', body: JSON.stringify({ name }) });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${await res.text()}`);
  const { key, id } = (await res.json()) as { key: string; id: string };
  return { key, subject: `key:${id}` };
}
const victimKey = (await register('storm-victim')).key;
// The limiter reads a key's tier at every decision: the victim's own allowance never paces it.
await sql`update paginated_collections.api_keys set tier = 'storm-victim' where name = 'storm-victim'`;
const stormers = [await register('storm-1'), await register('storm-2'), await register('storm-3')];
const stormKeys = stormers.map((stormer) => stormer.key);

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;
}

/** CPU over `body`, in microseconds: the server's PostgreSQL backends (not parallel workers), and the server process. */
async function cpuOver<T>(body: () => Promise<T>): Promise<[T, number, number]> {
  const pids = async () => backendPids(sql, postmaster, server.pid!);
  const before = snapshot(await pids());
  const serverBefore = snapshot([server.pid!]);
  const result = await body();
  return [result, cpuBetween(before, snapshot(await pids())), cpuBetween(serverBefore, snapshot([server.pid!]))];
}

interface Victim {
  latencies: number[];
  statuses: Record<number, number>;
}

/** The fourth client for `ms`: one request at a time; `path` is the storm request when calibrating. */
async function victim(ms: number, path?: string): Promise<Victim> {
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  const end = performance.now() + ms;
  let next = path ?? values.follow ?? CHEAP;
  while (performance.now() < end) {
    const started = performance.now();
    const res = await fetch(`${base}${next}`, { headers: { authorization: `Bearer ${victimKey}` } });
    const body = await res.text();
    latencies.push(performance.now() - started);
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    if (path === undefined && values.follow !== undefined) {
      const href = res.ok ? (JSON.parse(body) as { _links?: { next?: { href: string } } })._links?.next?.href : undefined;
      next = href ? new URL(href).pathname + new URL(href).search : values.follow;
    } else if (path === undefined) await sleep(50);
  }
  return { latencies, statuses };
}

const describe = ({ latencies, statuses }: Victim) =>
  `p50 ${quantile(latencies, 0.5).toFixed(1)} ms, p99 ${quantile(latencies, 0.99).toFixed(1)} ms, ${latencies.length} requests ${JSON.stringify(statuses)}`;

async function readyz(ms: number): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const res = await fetch(`${base}/readyz`);
    await res.arrayBuffer();
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    await sleep(500);
  }
  return statuses;
}

console.log(`storm: ${STORM}; the fourth client: ${values.follow ? `${values.follow}, following next links` : `${CHEAP} every 50 ms`}`);
const perMinute = (micros: number, s: number) => `${Math.round(micros / 1000 / (s / 60)).toLocaleString('en')} ms a minute`;
const [calm, calmPostgres, calmServer] = await cpuOver(() => victim(calmSeconds * 1000));
console.log(`calm:  the fourth client ${describe(calm)} in ${calmSeconds} s`);
console.log(`  CPU: PostgreSQL backends ${perMinute(calmPostgres, calmSeconds)}, server process ${perMinute(calmServer, calmSeconds)}`);
// What one storm request costs PostgreSQL when it runs alone, sent by the fourth key (whose tier never declines).
const [alone, aloneMicros] = await cpuOver(() => victim(CALIBRATION_SECONDS * 1000, STORM));
const perRequest = aloneMicros / Math.max(alone.latencies.length, 1);
console.log(`alone: the storm request ${describe(alone)}, ${Math.round(perRequest).toLocaleString('en')} µs of PostgreSQL each`);

// The storm keys from a process of their own (bench/storm-attacker.ts says why), 8 connections each.
const storm = spawn(process.execPath, ['bench/storm-attacker.ts', base, STORM, '8', String(seconds), ...stormKeys], {
  cwd: `${import.meta.dirname}/..`,
  env: values.vary === undefined ? process.env : { ...process.env, VARY: values.vary },
  // stdin: a pipe that closes with this process, which the storm takes as its end (bench/storm-attacker.ts).
  stdio: ['pipe', 'pipe', 'inherit'],
});
let printed = '';
await new Promise<void>((resolve) =>
  storm.stdout!.on('data', (chunk: Buffer) => {
    printed += chunk.toString();
    if (printed.startsWith('started\n')) resolve();
  }),
);
// 'close': its stdout read to the end.
const stormExit = new Promise((resolve) => storm.once('close', resolve));
// The storm stops with the fourth client's measurement, if it has not yet: run on past its tier's window
// (61 s for a minute), it would be served a second allowance.
const stormStarted = Date.now();
const measured = victim(seconds * 1000).then((result) => {
  storm.kill('SIGTERM');
  return result;
});
const [[during, ready], stormMicros, stormServer] = await cpuOver(() => Promise.all([measured, readyz(seconds * 1000)]));
await stormExit;
// The last lines: the log's buffer is flushed every 100 ms (lib/http/logger.ts).
await sleep(500);
const logged = await loggedBetween(stormStarted, Date.now());
const { served, cpuMicros: attackersMicros } = JSON.parse(printed.slice('started\n'.length)) as {
  served: Record<string, Record<number, number>>;
  cpuMicros: number;
};
const minutes = seconds / 60;
console.log(`storm: the fourth client ${describe(during)} in ${seconds} s`);
console.log(`storm keys over ${seconds} s (status: count): ${JSON.stringify(served)}`);
for (const [name, statuses] of Object.entries(served)) {
  const chunks = (statuses[200] ?? 0) / minutes;
  const ms = (chunks * perRequest) / 1000;
  const own = logged.get(stormers[Number(name.slice(3)) - 1]!.subject) ?? { pgMs: 0, charged: 0, requests: 0 };
  console.log(
    `  ${name}: ${Math.round(chunks)} served a minute × ${Math.round(perRequest)} µs = ${Math.round(ms).toLocaleString('en')} ms of PostgreSQL a minute (allowance ${FREE_UNITS_PER_MINUTE} units ≈ ${FREE_UNITS_PER_MINUTE} ms); ` +
      `by the server's clock, its statements ran ${Math.round(own.pgMs / minutes).toLocaleString('en')} ms a minute (${(own.pgMs / minutes / FREE_UNITS_PER_MINUTE).toFixed(2)} ms a unit of its allowance), charged ${Math.round(own.charged / minutes).toLocaleString('en')} units a minute over ${own.requests} logged requests`,
  );
}
console.log(
  `CPU during the storm (the storm, its 429s, the fourth client): PostgreSQL backends ${perMinute(stormMicros, seconds)}, server process ${perMinute(stormServer, seconds)}; the storm's own process (its clients, which on this machine share its cores) ${perMinute(attackersMicros, seconds)}`,
);
console.log(`/readyz during the storm: ${JSON.stringify(ready)}`);
await sql.end();
await stopProcess(server);
if (!process.env.KEEP_LOG) await rm(logDir, { recursive: true, force: true });
else console.log(`log: ${logFile}`);
