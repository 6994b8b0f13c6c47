// The bench's one output: a markdown table, each row's throughput also as a ratio to the baseline row's,
// then the ratios of chosen rows and the targets they and other figures are held to.
import type { Measurement } from './measure.ts';
import type { Comparison, RatioMeasure } from './scenario-types.ts';

/** A row's median round, and the lowest and highest req/s of all its rounds. */
export interface RoundsResult extends Measurement {
  minReqPerSec: number;
  maxReqPerSec: number;
}

export interface Row {
  name: string;
  server: string;
  baseline: boolean;
  result: RoundsResult | Error;
  /** The rounds that failed, as "round N: message"; the result is the median of the others. */
  failures: string[];
}

const HEADER = [
  'scenario',
  'server',
  'req/s',
  'range req/s',
  '× baseline',
  'mean ms',
  'p50 ms',
  'p99 ms',
  'non-2xx',
  'errors',
  'server µs/req',
  'pg µs/req',
  'redis µs/req',
  'loadgen µs/req',
];

// Two significant digits below 1, so a row at a thousandth of the baseline does not read 0.00.
const formatRatio = (ratio: number) => (ratio >= 1 || ratio === 0 ? ratio.toFixed(2) : ratio.toPrecision(2));

const whole = (n: number | undefined) => (n === undefined ? 'n/a' : Math.round(n).toLocaleString('en'));

function cells(row: Row, baseline: number | undefined): string[] {
  const name = row.baseline ? `${row.name} (baseline)` : row.name;
  if (row.result instanceof Error) return [name, row.server, 'failed', ...HEADER.slice(3).map(() => '')];
  const m = row.result;
  const ratio = baseline ? formatRatio(m.reqPerSec / baseline) : 'n/a';
  const range = m.minReqPerSec === m.maxReqPerSec ? '' : `${whole(m.minReqPerSec)}–${whole(m.maxReqPerSec)}`;
  return [
    name,
    row.server,
    whole(m.reqPerSec),
    range,
    ratio,
    m.meanMs.toFixed(2),
    String(m.p50),
    String(m.p99),
    whole(m.non2xx),
    whole(m.errors),
    whole(m.serverCpu),
    whole(m.postgresCpu),
    // Empty for a server that keeps nothing in Redis; n/a when its Redis is not on this host.
    m.redis ? whole(m.redisCpu) : '',
    whole(m.loadCpu),
  ];
}

/** The column of allocations, on tables where a row measured them (`--against`, `--allocations`). */
const ALLOC_HEADER = 'alloc KB/req';

const kilobytes = (bytes: number | undefined) => (bytes === undefined ? 'n/a' : (bytes / 1024).toFixed(1));

const measuredAllocations = (results: (RoundsResult | Error | undefined)[]) =>
  results.some((result) => result !== undefined && !(result instanceof Error) && result.allocBytes !== undefined);

/** Markdown with padded columns, readable as is in a terminal; numbers (`right(column)`) are right-aligned. */
export function markdown(header: string[], body: string[][], right: (column: number) => boolean): string {
  const widths = header.map((title, i) => Math.max(title.length, ...body.map((values) => values[i]!.length)));
  const line = (values: string[]) =>
    `| ${values.map((value, i) => (right(i) ? value.padStart(widths[i]!) : value.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `|${widths.map((width, i) => (right(i) ? `${'-'.repeat(width + 1)}:` : '-'.repeat(width + 2))).join('|')}|`;
  return [line(header), rule, ...body.map(line)].join('\n');
}

/** The rows' table. */
export function formatTable(rows: Row[]): string {
  const base = rows.find((row) => row.baseline)?.result;
  const baseline = base instanceof Error ? undefined : base?.reqPerSec;
  const body = rows.map((row) => cells(row, baseline));
  const allocations = measuredAllocations(rows.map((row) => row.result));
  // Every column after the scenario and the server is a number.
  return markdown(
    allocations ? [...HEADER, ALLOC_HEADER] : HEADER,
    allocations
      ? body.map((values, i) => {
          const result = rows[i]!.result;
          return [...values, result instanceof Error ? '' : kilobytes(result.allocBytes)];
        })
      : body,
    (column) => column >= 2,
  );
}

/** One line per failed round, under its row's name; undefined when every round succeeded. */
export function formatFailures(rows: Row[]): string | undefined {
  const lines = rows.flatMap((row) => row.failures.map((failure) => `- ${row.name}, ${failure}`));
  return lines.length === 0 ? undefined : lines.join('\n');
}

/** A row's median round, when it ran and did not fail. */
function resultOf(rows: Row[], name: string): RoundsResult | undefined {
  const result = rows.find((row) => row.name === name)?.result;
  return result instanceof Error ? undefined : result;
}

const RATIO_HEADER = ['ratio (row / row)', 'req/s', 'server µs/req', 'pg µs/req', 'server+pg+redis µs/req'];

/** One measure of `of` divided by the same of `to`; undefined when either lacks it. */
function ratioOf(measure: RatioMeasure, of: RoundsResult, to: RoundsResult): number | undefined {
  // All the CPU a request costs: the server's, PostgreSQL's, and Redis's for a server that keeps its state there.
  const cpu = (m: RoundsResult) =>
    m.serverCpu === undefined || m.postgresCpu === undefined || (m.redis && m.redisCpu === undefined)
      ? undefined
      : m.serverCpu + m.postgresCpu + (m.redis ? m.redisCpu! : 0);
  const pairs: Record<typeof measure, [number | undefined, number | undefined]> = {
    'req/s': [of.reqPerSec, to.reqPerSec],
    'time/req': [to.reqPerSec, of.reqPerSec],
    'cpu/req': [cpu(of), cpu(to)],
    'server/req': [of.serverCpu, to.serverCpu],
    'pg/req': [of.postgresCpu, to.postgresCpu],
    'alloc/req': [of.allocBytes, to.allocBytes],
  };
  const [a, b] = pairs[measure];
  return a === undefined || b === undefined || b === 0 ? undefined : a / b;
}

const twoDigits = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(2));

/** "≥ 1.0", "≥ 0.85" or "≤ 1.1": one decimal at least, more where the bound has them. */
function bound(target: { atLeast?: number; atMost?: number }): string {
  const value = target.atLeast ?? target.atMost!;
  const digits = Math.max(1, (String(value).split('.')[1] ?? '').length);
  return `${target.atLeast !== undefined ? '≥' : '≤'} ${value.toFixed(digits)}`;
}

function verdict(value: number, target: { atLeast?: number; atMost?: number }): string {
  const met = (target.atLeast === undefined || value >= target.atLeast) && (target.atMost === undefined || value <= target.atMost);
  return met ? 'met' : 'NOT met';
}

/**
 * The comparisons whose two rows both ran: each ratio of req/s and of CPU per request, and the target
 * with its verdict (`time/req` is the inverse of the req/s ratio: how much longer `of` takes per request).
 */
export function formatRatios(rows: Row[], comparisons: Comparison[]): string | undefined {
  const pairs = comparisons.flatMap((comparison) => {
    const of = resultOf(rows, comparison.of);
    const to = resultOf(rows, comparison.to);
    return of && to ? [{ comparison, of, to }] : [];
  });
  // The allocations' ratio where both rows of a comparison measured them, in a column of its own.
  const allocations = pairs.some(({ of, to }) => measuredAllocations([of]) && measuredAllocations([to]));
  const measures: RatioMeasure[] = ['req/s', 'server/req', 'pg/req', 'cpu/req', ...(allocations ? (['alloc/req'] as const) : [])];
  const header = [...RATIO_HEADER, ...(allocations ? ['alloc B/req'] : []), 'target'];
  const body = pairs.map(({ comparison, of, to }) => {
    const target = comparison.target;
    const value = target && ratioOf(target.measure, of, to);
    return [
      comparison.label,
      ...measures.map((measure) => twoDigits(ratioOf(measure, of, to))),
      target ? `${target.measure} ${twoDigits(value)} (${bound(target)}): ${value === undefined ? 'n/a' : verdict(value, target)}` : '',
    ];
  });
  return body.length === 0 ? undefined : markdown(header, body, (column) => column >= 1 && column < header.length - 1);
}

/** A figure held to a bound, e.g. a row's mean latency or the seeding time. */
export interface Threshold {
  label: string;
  value: number | undefined;
  unit: string;
  atLeast?: number;
  atMost?: number;
}

/** One line per threshold that was measured: the figure, its bound and the verdict. */
export function formatThresholds(thresholds: Threshold[]): string | undefined {
  const lines = thresholds
    .filter((threshold) => threshold.value !== undefined)
    .map((t) => `- ${t.label}: ${t.value!.toFixed(2)} ${t.unit} (target ${bound(t)} ${t.unit}): ${verdict(t.value!, t)}`);
  return lines.length === 0 ? undefined : lines.join('\n');
}

/** The latency a row's median round measured, for a threshold. */
export function meanLatencyOf(rows: Row[], name: string): number | undefined {
  return resultOf(rows, name)?.meanMs;
}
