// The bench's one output: a markdown table, each row's throughput also as a ratio to the baseline row's.
import type { Measurement } from './measure.ts';

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
}

const HEADER = [
  'scenario',
  'server',
  'req/s',
  'range req/s',
  '× baseline',
  'p50 ms',
  'p99 ms',
  'non-2xx',
  'errors',
  'server µs/req',
  'pg µs/req',
  'loadgen µs/req',
];
const RIGHT_ALIGNED = new Set(HEADER.slice(2));

// Two significant digits below 1, so a row at a thousandth of the baseline does not read 0.00.
const formatRatio = (ratio: number) => (ratio >= 1 || ratio === 0 ? ratio.toFixed(2) : ratio.toPrecision(2));

const whole = (n: number | undefined) => (n === undefined ? 'n/a' : Math.round(n).toLocaleString('en'));

function cells(row: Row, baseline: number | undefined): string[] {
  const name = row.baseline ? `${row.name} (baseline)` : row.name;
  if (row.result instanceof Error)
    return [name, row.server, `failed: ${row.result.message.split('\n')[0]}`, ...HEADER.slice(3).map(() => '')];
  const m = row.result;
  const ratio = baseline ? formatRatio(m.reqPerSec / baseline) : 'n/a';
  const range = m.minReqPerSec === m.maxReqPerSec ? '' : `${whole(m.minReqPerSec)}–${whole(m.maxReqPerSec)}`;
  return [
    name,
    row.server,
    whole(m.reqPerSec),
    range,
    ratio,
    String(m.p50),
    String(m.p99),
    whole(m.non2xx),
    whole(m.errors),
    whole(m.serverCpu),
    whole(m.postgresCpu),
    whole(m.loadCpu),
  ];
}

function line(values: string[], widths: number[]): string {
  const padded = values.map((value, i) => (RIGHT_ALIGNED.has(HEADER[i]!) ? value.padStart(widths[i]!) : value.padEnd(widths[i]!)));
  return `| ${padded.join(' | ')} |`;
}

/** Markdown with padded columns, readable as is in a terminal. */
export function formatTable(rows: Row[]): string {
  const base = rows.find((row) => row.baseline)?.result;
  const baseline = base instanceof Error ? undefined : base?.reqPerSec;
  const body = rows.map((row) => cells(row, baseline));
  const widths = HEADER.map((title, i) => Math.max(title.length, ...body.map((values) => values[i]!.length)));
  const rule = `|${widths.map((width, i) => (RIGHT_ALIGNED.has(HEADER[i]!) ? `${'-'.repeat(width + 1)}:` : '-'.repeat(width + 2))).join('|')}|`;
  return [line(HEADER, widths), rule, ...body.map((values) => line(values, widths))].join('\n');
}
