// The storms' table of `npm run bench` (bench/storm.ts, formatStorms): the fourth client's latency as it
// measured it and as the server's request log has it, and the count storm held to the same targets as the
// planner trap (docs/reference/bench.md, "The storms").
import t from 'tap';
import { formatStorms, type StormResult, stormRows } from '../../bench/storm.ts';
import { formatThresholds } from '../../bench/table.ts';

/** 100 latencies, 1 to 100 ms, times `scale`: p50 51, p99 100 (times scale). */
const spread = (scale: number) => Array.from({ length: 100 }, (_, i) => (i + 1) * scale);

const result = (duringScale: number, served: boolean): StormResult => ({
  allowance: 600,
  windowSeconds: 60,
  seconds: 60,
  calm: { latencies: spread(0.1), statuses: { 200: 100 }, ...(served ? { served: spread(0.04) } : {}) },
  alone: { latencies: spread(1), statuses: { 200: 100 } },
  aloneMicros: 100_000,
  during: { latencies: spread(0.1 * duringScale), statuses: { 200: 100 }, ...(served ? { served: spread(0.06) } : {}) },
  keys: [1, 2, 3].map((n) => ({
    name: `key${n}`,
    statuses: { 200: 600, 429: 60_000 },
    pgMs: 600,
    pgShareMs: 300,
    charged: 600,
    requests: 60_600,
  })),
  cpu: { postgres: 1, server: 1, attackers: 1 },
  readyz: { 200: 120 },
  logFile: undefined,
});

t.test("the table gives the fourth client's p50 / p99 by its own clock and by the server's log", async (t) => {
  const count = stormRows.find((row) => row.name === 'count storm')!;
  const { table } = formatStorms([[count, result(3, true)]]);
  const [header, , row] = table.split('\n').map((line) => line.split('|').map((cell) => cell.trim()));
  t.same(header!.slice(1, 7), [
    'storm',
    'alone p50 / p99 ms',
    'storm p50 / p99 ms',
    'p99 × alone',
    'server: alone p50 / p99 ms',
    'server: storm p50 / p99 ms',
  ]);
  t.same(row!.slice(1, 7), ['count storm', '5.1 / 10.0', '15.3 / 30.0', '3.00', '2.0 / 4.0', '3.1 / 6.0']);
});

t.test('without log lines for the fourth client, its server columns are empty', async (t) => {
  const count = stormRows.find((row) => row.name === 'count storm')!;
  const [, , row] = formatStorms([[count, result(3, false)]])
    .table.split('\n')
    .map((line) => line.split('|').map((cell) => cell.trim()));
  t.same(row!.slice(5, 7), ['', '']);
});

t.test('the count storm is held to the p99 target, met or not', async (t) => {
  const count = stormRows.find((row) => row.name === 'count storm')!;
  const missed = formatThresholds(formatStorms([[count, result(3, true)]]).thresholds) ?? '';
  t.match(missed, /count storm: the fourth client's p99 during the storm \/ alone[^\n]*3\.00[^\n]*NOT met/);
  const met = formatThresholds(formatStorms([[count, result(1.5, true)]]).thresholds) ?? '';
  t.match(met, /count storm: the fourth client's p99 during the storm \/ alone[^\n]*1\.50[^\n]*met/);
  t.notMatch(met, /NOT met/);
  t.match(met, /count storm: each storm key's PostgreSQL time/);
});
