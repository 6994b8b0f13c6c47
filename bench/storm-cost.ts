// `tsx bench/storm-cost.ts <database url> [service dir] [seconds]`: issue 11's deep-offset storm against a real server.
// Three free keys send `sort=-priceCents,name&offset=999000&count=none` from 8 loops each, ignoring 429s
// (a hostile client); another free key sends one cheap chunk every 50 ms. Prints that client's latency
// before and during the storm, what the storm keys were served, and /readyz. Not part of the tests.
import { spawn } from 'node:child_process';
import postgres from 'postgres';
import { stopProcess } from '../tests/helpers/processes.ts';
import { sleep } from '../tests/helpers/wait.ts';
import { benchPort } from './processes.ts';

const [databaseUrl, dir = process.cwd(), secondsText = '30'] = process.argv.slice(2);
if (!databaseUrl) throw new Error('Usage: tsx bench/storm-cost.ts <database url> [service dir] [seconds]');
const seconds = Number(secondsText);
const port = await benchPort();
const base = `http://127.0.0.1:${port}`;
const STORM = process.env.STORM ?? '/v1/products?sort=-priceCents,name&offset=999000&count=none';
const CHEAP = '/v1/products?count=none';

// Fresh keys each run: forget the registrations and windows of earlier runs (the bench's own database).
const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
await admin`delete from rate_windows`;
await admin`delete from api_keys where name like 'storm-%'`;
await admin.end();

const server = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], {
  cwd: dir,
  env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, PORT: String(port) },
  stdio: ['ignore', 'pipe', 'inherit'],
});
await new Promise<void>((resolve) => server.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('Listening') && resolve()));

async function register(name: string): Promise<string> {
  const res = await fetch(`${base}/v1/keys`, { method: 'POST', body: JSON.stringify({ name }) });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { key: string }).key;
}
const victimKey = await register('storm-victim');
const stormKeys = [await register('storm-1'), await register('storm-2'), await register('storm-3')];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;
}

async function victim(ms: number): Promise<{ latencies: number[]; statuses: Record<number, number> }> {
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const started = performance.now();
    const res = await fetch(`${base}${CHEAP}`, { headers: { authorization: `Bearer ${victimKey}` } });
    await res.arrayBuffer();
    latencies.push(performance.now() - started);
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    await sleep(50);
  }
  return { latencies, statuses };
}

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

const calm = await victim(5_000);
console.log(
  `calm:  victim median ${median(calm.latencies).toFixed(1)} ms, p95 ${quantile(calm.latencies, 0.95).toFixed(1)} ms, ${JSON.stringify(calm.statuses)}`,
);

let stop = false;
const served: Record<string, Record<number, number>> = {};
async function attacker(key: string, name: string): Promise<void> {
  served[name] ??= {};
  while (!stop) {
    try {
      const res = await fetch(`${base}${STORM}`, { headers: { authorization: `Bearer ${key}` } });
      await res.arrayBuffer();
      served[name]![res.status] = (served[name]![res.status] ?? 0) + 1;
    } catch {
      served[name]![0] = (served[name]![0] ?? 0) + 1;
    }
  }
}
const attackers = stormKeys.flatMap((key, i) => Array.from({ length: 8 }, () => attacker(key, `key${i + 1}`)));
const [storm, ready] = await Promise.all([victim(seconds * 1000), readyz(seconds * 1000)]);
stop = true;
await Promise.all(attackers);
console.log(
  `storm: victim median ${median(storm.latencies).toFixed(1)} ms, p95 ${quantile(storm.latencies, 0.95).toFixed(1)} ms, ${JSON.stringify(storm.statuses)}`,
);
console.log(`storm keys over ${seconds} s (status: count): ${JSON.stringify(served)}`);
console.log(`/readyz during the storm: ${JSON.stringify(ready)}`);
await stopProcess(server);
