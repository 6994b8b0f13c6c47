// `node bench/storm-cost.ts <database url> [service dir] [seconds] [--query PATH] [--follow PATH] [--calm S] [--vary PARAM]`:
// a storm against a real server (docs/explanation/budgets.md, "The storms it stops"; bench/storm.ts). Three free keys send
// `--query` (default issue 11's deep offset, `sort=-priceCents,name&offset=999000&count=none`) from 8
// connections each, ignoring 429s, with `--vary PARAM` each request its own statement; a fourth key, on a tier
// that never declines, sends one cheap chunk every 50 ms, or with `--follow PATH` reads PATH's chunks one at a
// time without pause, following next links. Prints that client's latency alone and during the storm, what the
// storm keys were served, the PostgreSQL time each storm key got per minute, and /readyz. `npm run bench` runs
// its storm rows through the same code; this runs one storm with any request.
import { parseArgs } from 'node:util';
import { msPerUnit, quantile, runStorm, type Victim } from './storm.ts';

const USAGE =
  'Usage: node bench/storm-cost.ts <database url> [service dir] [seconds] [--query PATH] [--follow PATH] [--calm S] [--vary PARAM]';
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { query: { type: 'string' }, follow: { type: 'string' }, calm: { type: 'string' }, vary: { type: 'string' } },
});
const [databaseUrl, dir = process.cwd(), secondsText = '30'] = positionals;
if (!databaseUrl) throw new Error(USAGE);
const query = values.query ?? process.env.STORM ?? '/v1/products?sort=-priceCents,name&offset=999000&count=none';

const describe = ({ latencies, statuses, served }: Victim) =>
  `p50 ${quantile(latencies, 0.5).toFixed(1)} ms, p99 ${quantile(latencies, 0.99).toFixed(1)} ms, ${latencies.length} requests ${JSON.stringify(statuses)}` +
  (served === undefined || served.length === 0
    ? ''
    : ` (by the server's log: p50 ${quantile(served, 0.5).toFixed(1)} ms, p99 ${quantile(served, 0.99).toFixed(1)} ms)`);

console.log(
  `storm: ${query}; the fourth client: ${values.follow ? `${values.follow}, following next links` : '/v1/products?count=none every 50 ms'}`,
);
const result = await runStorm({
  databaseUrl,
  dir,
  seconds: Number(secondsText),
  calmSeconds: Number(values.calm ?? '5'),
  query,
  follow: values.follow,
  vary: values.vary,
  keepLog: Boolean(process.env.KEEP_LOG),
  log: (line) => console.error(line),
});
const { seconds, allowance, windowSeconds } = result;
const perMinute = (micros: number) => `${Math.round(micros / 1000 / (seconds / 60)).toLocaleString('en')} ms a minute`;
const perRequest = result.aloneMicros / Math.max(result.alone.latencies.length, 1);
console.log(`calm:  the fourth client ${describe(result.calm)}`);
console.log(`alone: the storm request ${describe(result.alone)}, ${Math.round(perRequest).toLocaleString('en')} µs of PostgreSQL each`);
console.log(`storm: the fourth client ${describe(result.during)} in ${seconds} s`);
for (const key of result.keys) {
  const rate = (ms: number) => msPerUnit(ms, seconds, allowance, windowSeconds).toFixed(2);
  console.log(
    `  ${key.name} ${JSON.stringify(key.statuses)}: its statements ran ${perMinute(key.pgShareMs * 1000)} on PostgreSQL, its share of statements shared ` +
      `(${rate(key.pgShareMs)} ms a unit of its allowance of ${allowance}), ${perMinute(key.pgMs * 1000)} counting each shared statement whole, what it was charged for ` +
      `(${rate(key.pgMs)} ms a unit); charged ${Math.round((key.charged / seconds) * 60).toLocaleString('en')} units a minute over ${key.requests} logged requests`,
  );
}
console.log(
  `CPU during the storm (the storm, its 429s, the fourth client): PostgreSQL backends ${perMinute(result.cpu.postgres)}, server process ${perMinute(result.cpu.server)}; the storm's own process (its clients, which on this machine share its cores) ${perMinute(result.cpu.attackers)}`,
);
console.log(`/readyz during the storm: ${JSON.stringify(result.readyz)}`);
if (result.logFile) console.log(`log: ${result.logFile}`);
