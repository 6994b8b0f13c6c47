// `npm run bench`: seeds 1M products into the `bench` database, starts the servers, runs every scenario, prints one table.
import { parseArgs } from 'node:util';
import { type Against, checkoutAgainst, twinComparisons, twinServer, withTwins } from './against.ts';
import { type CeilingOptions, ceilingDatabase, runCeiling } from './ceiling.ts';
import { type BenchDatabase, benchDatabaseName, ensureProducts, measureSeeding, openBenchDatabase, postgresServer } from './database.ts';
import { type LoadOptions, type Measurement, measure } from './measure.ts';
import { type RunningServer, runtimeVersion, type ServerVariant, startServer } from './processes.ts';
import { type FoundRedis, findRedis } from './redis.ts';
import type { Scenario } from './scenario-types.ts';
import { comparisons, latencyTargets, scenarios, servers } from './scenarios.ts';
import { sizeComparisons, sizeScenarios, sizeServer } from './sizes.ts';
import { formatStorms, runStorm, type StormResult, type StormRow, stormRows } from './storm.ts';
import {
  formatFailures,
  formatRatios,
  formatTable,
  formatThresholds,
  meanLatencyOf,
  type RoundsResult,
  type Row,
  type Threshold,
} from './table.ts';

const PRODUCTS = 1_000_000;
/** The seeding measurement, selected by --only like a row. */
const SEEDING = `seeding ${PRODUCTS.toLocaleString('en')} products`;
const SEEDING_TARGET_SECONDS = 10;
/** The most seconds of the window in which a row's allocations are measured, after its measured seconds. */
const ALLOC_SECONDS = 3;
const USAGE = [
  'Usage: npm run bench -- [--rounds N] [--duration S] [--warmup S] [--connections N] [--only TEXT]... [--against REF] [--allocations]',
  '       npm run bench -- --ceiling [--duration S] [--warmup S] [--connections N] [--subjects 1,1000,100000] [--batches 1,8]',
  '       npm run bench -- --sizes 50000,10000000 [--rounds N] [--duration S] [--warmup S] [--connections N] [--only TEXT]',
].join('\n');

// Progress goes to stderr: stdout carries only the table.
const log = (line: string) => console.error(line);

interface BenchOptions extends LoadOptions {
  /**
   * Keep only scenarios whose name contains one of these (the baseline always runs), and the seeding measurement
   * if its name does; undefined: all.
   */
  only: string[] | undefined;
  /** `--against`: a git ref whose service runs a twin of every selected row of `service` (bench/against.ts). */
  against: string | undefined;
  /** Times every scenario is measured, in rotation; each row reports its median round. */
  rounds: number;
  /** `--ceiling`: the rate limiter's ceiling on one PostgreSQL instead of the rows (bench/ceiling.ts). */
  ceiling: Omit<CeilingOptions, 'signal'> | undefined;
  /** `--sizes`: the default chunk and its neighbours at each of these table sizes (bench/sizes.ts) instead of the rows. */
  sizes: number[] | undefined;
}

/** Whether `--only` keeps the row or measurement named `name`. */
const chosen = (only: string[] | undefined, name: string) => only === undefined || only.some((text) => name.includes(text));

function positiveNumber(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || n < min) throw new Error(`Invalid --${name}: expected a number of at least ${min}, got "${value}"`);
  return n;
}

function positiveList(name: string, value: string | undefined, fallback: number[]): number[] {
  if (value === undefined) return fallback;
  if (!/^\d+(,\d+)*$/.test(value) || value.split(',').some((n) => Number(n) < 1)) {
    throw new Error(`Invalid --${name}: expected positive integers separated by commas, got "${value}"`);
  }
  return value.split(',').map(Number);
}

function parseOptions(args: string[]): BenchOptions {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      only: { type: 'string', multiple: true },
      rounds: { type: 'string' },
      ceiling: { type: 'boolean' },
      subjects: { type: 'string' },
      batches: { type: 'string' },
      sizes: { type: 'string' },
      against: { type: 'string' },
      allocations: { type: 'boolean' },
    },
  });
  if (values.sizes !== undefined && values.ceiling) throw new Error('Invalid --sizes: it does not go with --ceiling');
  if ((values.against !== undefined || values.allocations) && (values.sizes !== undefined || values.ceiling)) {
    throw new Error('Invalid --against or --allocations: they go with the rows, not with --sizes or --ceiling');
  }
  if (!values.ceiling && (values.subjects !== undefined || values.batches !== undefined)) {
    throw new Error('Invalid --subjects or --batches: they go with --ceiling');
  }
  // The ceiling's cells are many and short: 1 s warms a cell's connections, 4 of them fill this machine's cores.
  const ceiling = values.ceiling
    ? {
        duration: positiveNumber('duration', values.duration, 5, 1),
        warmup: positiveNumber('warmup', values.warmup, 1, 0),
        connections: Math.round(positiveNumber('connections', values.connections, 4, 1)),
        subjects: positiveList('subjects', values.subjects, [1, 1_000, 100_000]),
        batches: positiveList('batches', values.batches, [1, 8]),
      }
    : undefined;
  const duration = positiveNumber('duration', values.duration, 5, 1);
  return {
    ceiling,
    sizes: values.sizes === undefined ? undefined : positiveList('sizes', values.sizes.replaceAll('_', ''), []),
    rounds: Math.round(positiveNumber('rounds', values.rounds, 3, 1)),
    duration,
    warmup: positiveNumber('warmup', values.warmup, 2, 0),
    connections: Math.round(positiveNumber('connections', values.connections, 10, 1)),
    only: values.only,
    against: values.against,
    // What a request allocates barely moves from one window to the next: a short window of its own suffices.
    allocSeconds: values.allocations || values.against !== undefined ? Math.min(duration, ALLOC_SECONDS) : 0,
  };
}

/** Catches a mistake in scenarios.ts before anything is started. */
function checkScenarios(list: Scenario[]): void {
  const names = new Set<string>();
  for (const scenario of list) {
    if (names.has(scenario.name)) throw new Error(`Two scenarios are named "${scenario.name}"`);
    names.add(scenario.name);
    if (!servers.some((server) => server.name === scenario.server)) {
      throw new Error(`Scenario "${scenario.name}" targets an unknown server "${scenario.server}"`);
    }
  }
  const baselines = list.filter((scenario) => scenario.baseline).length;
  if (baselines !== 1) throw new Error(`Exactly one scenario must be the baseline; found ${baselines}`);
}

/** Everything the bench started, stopped in reverse order, once, on success, failure or a signal. */
class Resources {
  private readonly stops: (() => Promise<void>)[] = [];
  private closing: Promise<void> | undefined;

  add(stop: () => Promise<void>): void {
    this.stops.push(stop);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const stop of this.stops.reverse()) {
        await stop().catch((error: unknown) => log(`While stopping: ${(error as Error).message}`));
      }
    })();
    return this.closing;
  }
}

async function startServers(
  selected: Scenario[],
  database: BenchDatabase,
  resources: Resources,
  variants = servers,
  allocations = false,
): Promise<Map<string, RunningServer>> {
  const running = new Map<string, RunningServer>();
  for (const variant of variants.filter((server) => selected.some((scenario) => scenario.server === server.name))) {
    const undo = await variant.prepare?.(database, log);
    if (undo) resources.add(undo);
    log(`Starting server ${variant.name} (${variant.root ? `${variant.entry} in ${variant.root}` : variant.entry})`);
    const server = await startServer(variant, database.url, { allocations });
    resources.add(() => server.stop());
    running.set(variant.name, server);
    log(`  ${variant.name}: pid ${server.pid} on ${server.origin}`);
  }
  return running;
}

/**
 * Measures every scenario `rounds` times, one round after another, so that the machine's drift over the
 * run (a shared machine's speed moves within minutes) falls on every row alike; each row reports its median
 * round.
 */
async function runScenarios(
  selected: Scenario[],
  running: Map<string, RunningServer>,
  database: BenchDatabase,
  options: BenchOptions,
  redisPid?: number,
): Promise<Row[]> {
  const measured = new Map<Scenario, Measurement[]>(selected.map((scenario) => [scenario, []]));
  const failures = new Map<Scenario, string[]>(selected.map((scenario) => [scenario, []]));
  for (let round = 1; round <= options.rounds; round++) {
    for (const scenario of selected) {
      if (options.signal?.aborted) break;
      const server = running.get(scenario.server)!;
      const allocations = server.allocations && options.allocSeconds ? `, ${options.allocSeconds} s of allocations` : '';
      log(
        `Round ${round}/${options.rounds}: "${scenario.name}" on ${scenario.server}: ${options.warmup} s warm-up, ${options.duration} s measured${allocations}`,
      );
      const result = await measure(scenario, server, { ...database, redisPid }, options).catch((error: Error) => error);
      if (result instanceof Error) {
        // A round that fails (a typo in the row, or the database refusing connections for a moment) is
        // left out and the row tried again in the next round; its last output lines say what went wrong.
        log(`  failed: ${result.message}\n  ${server.variant.name}'s last output:\n${server.output().replace(/^/gm, '    ')}`);
        failures.get(scenario)!.push(`round ${round}: ${result.message.split('\n')[0]}`);
      } else {
        measured.get(scenario)!.push(result);
      }
    }
  }
  return selected.map((scenario) => ({
    name: scenario.name,
    server: scenario.server,
    baseline: scenario.baseline ?? false,
    result: medianRound(measured.get(scenario)!, failures.get(scenario)!),
    failures: failures.get(scenario)!,
  }));
}

/** The round with the median req/s (the lower middle one of an even count), and the range over all rounds. */
function medianRound(rounds: Measurement[], failures: string[]): RoundsResult | Error {
  if (rounds.length === 0) return new Error(failures.length > 0 ? 'every round failed' : 'interrupted before it was measured');
  const sorted = [...rounds].sort((a, b) => a.reqPerSec - b.reqPerSec);
  return { ...sorted[Math.floor((sorted.length - 1) / 2)]!, minReqPerSec: sorted[0]!.reqPerSec, maxReqPerSec: sorted.at(-1)!.reqPerSec };
}

/** What the CPU columns count, with the processes found for them. */
interface Counted {
  /** The postmaster of the bench database's cluster (undefined: not on this host, pg µs/req n/a). */
  postmaster: number | undefined;
  /** The Redis of the rows of servers that keep their state there, when they ran. */
  redis?: FoundRedis;
  /** The other commit the twin rows ran (`--against`). */
  against?: Against;
}

/** `text`'s words in lines of at most `width` characters. */
function wrap(text: string, width = 118): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  return [...lines, line].join('\n');
}

function describeRun(options: BenchOptions, counted: Counted, products = `${PRODUCTS.toLocaleString('en')} products`): string {
  const cluster =
    counted.postmaster === undefined
      ? "none: the bench database's cluster is not on this host"
      : `children of the bench database's postmaster (pid ${counted.postmaster}), so no other cluster's`;
  const found = counted.redis?.found ? counted.redis : undefined;
  const redis = found
    ? ` redis µs/req, in the Fastify peer's rows: the whole redis-server process it keeps its counters in (Redis ${found.version} on ${found.url}, ${
        found.pid === undefined ? 'not on this host: n/a' : `pid ${found.pid}`
      }), whoever else uses it;`
    : '';
  return wrap(
    [
      `Bench: ${products}; autocannon, ${options.connections} connections (unless the row names its clients), ${options.duration} s per row`,
      `after ${options.warmup} s warm-up, ${options.rounds} round${options.rounds === 1 ? '' : 's'} over all rows, each row showing its median round.`,
      'Latencies over all responses: the mean to the microsecond, p50 and p99 in whole milliseconds.',
      'CPU per response, from /proc: server µs/req, the server process; pg µs/req, the PostgreSQL backends serving its',
      `own connections (not parallel workers), ${cluster};${redis} loadgen µs/req, this process (autocannon).`,
      'The measured tables are vacuumed before every row. Compare ratios within one run, not across runs.',
      ...(options.allocSeconds
        ? [
            `alloc KB/req: what the server process allocated per response (V8's sampling heap profiler, what the GC has`,
            `collected included; Node servers only), in ${options.allocSeconds} s of its own after the measured seconds, so that`,
            'the other columns are measured with the profiler off.',
          ]
        : []),
      ...(counted.against
        ? [
            `Rows marked [${counted.against.ref}] ran on the service started from a worktree of ${counted.against.ref}`,
            `(${counted.against.commit.slice(0, 12)}) with the same environment and setup, each measured right after its row of this checkout.`,
          ]
        : []),
    ].join(' '),
  );
}

/**
 * The runtimes of the servers that ran, with their versions: Node.js runs the bench, autocannon and every
 * server that names no other runtime.
 */
function runtimesLine(variants: ServerVariant[]): string {
  const others = new Map<string, string[]>();
  for (const variant of variants) {
    if (variant.runtime === undefined || variant.runtime === 'node') continue;
    others.set(variant.runtime, [...(others.get(variant.runtime) ?? []), variant.name]);
  }
  const node = `${runtimeVersion('node')} (the bench, autocannon and ${others.size > 0 ? 'the other servers' : 'the servers'})`;
  const rest = [...others].map(([runtime, names]) => `${runtimeVersion(runtime as 'deno' | 'bun')} (${names.join(', ')})`);
  return `runtime: ${[node, ...rest].join('; ')}`;
}

/** Seconds of each storm: a window of the free tier, so that what each storm key is served falls in one. */
const STORM_SECONDS = 60;
/** Seconds the fourth client is measured alone before each storm. */
const STORM_CALM_SECONDS = 15;

/**
 * The storms (bench/storm.ts), one after another, each with a server of its own; each storm's failure is its
 * row's, not the bench's.
 */
async function runStorms(selected: StormRow[], database: BenchDatabase, signal: AbortSignal): Promise<[StormRow, StormResult | Error][]> {
  const results: [StormRow, StormResult | Error][] = [];
  for (const row of selected) {
    if (signal.aborted) break;
    log(`Storm "${row.name}": ${STORM_CALM_SECONDS} s calm, ${STORM_SECONDS} s storm`);
    const result = await runStorm({
      databaseUrl: database.url,
      dir: `${import.meta.dirname}/..`,
      seconds: STORM_SECONDS,
      calmSeconds: STORM_CALM_SECONDS,
      query: row.query,
      follow: row.follow,
      vary: row.vary,
      log,
    }).catch((error: Error) => error);
    if (result instanceof Error) log(`  failed: ${result.message}`);
    results.push([row, result]);
  }
  return results;
}

/** The table, the ratios of rows that both ran, the storms, and the targets measured. */
function report(
  options: BenchOptions,
  rows: Row[],
  seedingSeconds: number | undefined,
  counted: Counted,
  ran: ServerVariant[],
  storms: [StormRow, StormResult | Error][] = [],
): string {
  const stormed = storms.length > 0 ? formatStorms(storms) : undefined;
  const thresholds: Threshold[] = [
    ...latencyTargets.map(({ row, atMostMs }) => ({
      label: `${row}: mean latency`,
      value: meanLatencyOf(rows, row),
      unit: 'ms',
      atMost: atMostMs,
    })),
    { label: SEEDING, value: seedingSeconds, unit: 's', atMost: SEEDING_TARGET_SECONDS },
    ...(stormed?.thresholds ?? []),
  ];
  const ratios = formatRatios(rows, comparisons);
  const against = counted.against;
  const twins = against && formatRatios(rows, twinComparisons(scenarios, against));
  const targets = formatThresholds(thresholds);
  const failures = formatFailures(rows);
  return [
    describeRun(options, counted),
    `${runtimesLine(ran)}\n\n${formatTable(rows)}`,
    ...(failures ? [`Rounds that failed (left out of their rows):\n\n${failures}`] : []),
    ...(ratios ? [`Ratios of rows (each measure of the first row divided by the second's):\n\n${ratios}`] : []),
    ...(twins ? [`This checkout against ${against.ref} (each measure of this checkout's row divided by its twin's):\n\n${twins}`] : []),
    ...(stormed ? [`${STORMS_CAPTION}\n\n${stormed.table}`] : []),
    ...(targets ? [`Other targets:\n\n${targets}`] : []),
  ].join('\n\n');
}

const STORMS_CAPTION = wrap(
  [
    `Storms (docs/explanation/budgets.md, "The storms it stops"): three free keys send the storm request from 8 connections each for ${STORM_SECONDS} s,`,
    'ignoring 429s, while a fourth key reads cursor chunks one at a time (alone first, for',
    `${STORM_CALM_SECONDS} s); each on a server of its own. pg ms/unit: the most of the three keys' PostgreSQL time a minute`,
    "(the request log's pgShareMs: a statement shared by n requests counts a nth to each) per unit of its allowance;",
    'charged-for ms/unit: the same with each request counted its whole statement, what it was charged for.',
  ].join(' '),
);

/** Seconds a seed of `products` is held to: 10 s up to a million (SEEDING_TARGET_SECONDS), 9 s a million above. */
const seedingTarget = (products: number) => Math.max(SEEDING_TARGET_SECONDS, (9 * products) / 1_000_000);

/**
 * `--sizes`: for each size, its own database (seeded once, timed when it is) and its own service process,
 * the size's rows measured, then both stopped before the next size; one table and the ratios for all.
 */
async function runSizes(sizes: number[], options: BenchOptions, resources: Resources): Promise<number> {
  const server = sizeServer(servers.find((variant) => variant.name === 'service')!);
  const rows: Row[] = [];
  const seeding: Threshold[] = [];
  let postmaster: number | undefined;
  for (const products of sizes) {
    if (options.signal?.aborted) break;
    const size = new Resources();
    resources.add(() => size.close());
    try {
      const database = await openBenchDatabase(process.env.DATABASE_URL || undefined, log, benchDatabaseName(products));
      size.add(() => database.close());
      postmaster = database.postmaster;
      const seconds = await ensureProducts(database, products, log);
      const label = `seeding ${products.toLocaleString('en')} products`;
      seeding.push({ label, value: seconds, unit: 's', atMost: seedingTarget(products) });
      const running = await startServers([{ name: '', server: server.name }], database, size, [server]);
      const selected = sizeScenarios(products, server.name).filter((row) => chosen(options.only, row.name));
      rows.push(...(await runScenarios(selected, running, database, options)));
    } finally {
      await size.close();
    }
  }
  if (options.signal?.aborted) return 130;
  const ratios = formatRatios(rows, sizeComparisons(sizes, server.name));
  const targets = formatThresholds(seeding);
  const failures = formatFailures(rows);
  console.log(
    [
      describeRun(options, { postmaster }, `${sizes.map((n) => n.toLocaleString('en')).join(' and ')} products, each in its own database`),
      `${runtimesLine([server])}\n\n${formatTable(rows)}`,
      ...(failures ? [`Rounds that failed (left out of their rows):\n\n${failures}`] : []),
      ...(ratios ? [`Ratios of rows (each measure of the first row divided by the second's):\n\n${ratios}`] : []),
      ...(targets ? [`Seeding (only when this run seeded):\n\n${targets}`] : []),
    ].join('\n\n'),
  );
  return rows.some((row) => row.result instanceof Error || row.failures.length > 0) ? 1 : 0;
}

async function main(): Promise<number> {
  let options: BenchOptions;
  try {
    options = parseOptions(process.argv.slice(2));
    checkScenarios(scenarios);
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const only = options.only;
  let selected = scenarios.filter((scenario) => scenario.baseline || chosen(only, scenario.name));
  // The rows of servers that keep their state in Redis run only when a Redis answers: otherwise one line says
  // so and they are left out, which is not a failure.
  const inRedis = (scenario: Scenario) => servers.find((server) => server.name === scenario.server)?.redis === true;
  let redis: FoundRedis | undefined;
  if (selected.some(inRedis)) {
    redis = await findRedis();
    if (!redis.found) {
      const skipped = [...new Set(selected.filter(inRedis).map((scenario) => scenario.server))].join(', ');
      log(`No Redis answers on ${redis.url} (${redis.reason}): skipping the rows of ${skipped}; set REDIS_URL to use another`);
      selected = selected.filter((scenario) => !inRedis(scenario));
    }
  }
  const withRedis = (variant: ServerVariant): ServerVariant =>
    variant.redis && redis?.found ? { ...variant, env: { ...variant.env, REDIS_URL: redis.url } } : variant;

  const resources = new Resources();
  const interrupted = new AbortController();
  const interrupt = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping every process the bench started`);
    interrupted.abort();
    void resources.close().then(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  if (options.sizes) {
    try {
      return await runSizes(options.sizes, { ...options, signal: interrupted.signal }, resources);
    } finally {
      await resources.close();
    }
  }
  if (options.ceiling) {
    try {
      const server = await postgresServer(process.env.DATABASE_URL || undefined, log);
      resources.add(() => server.stop());
      const database = await ceilingDatabase(server.url);
      resources.add(() => database.drop());
      console.log(await runCeiling(database.url, { ...options.ceiling, signal: interrupted.signal }, log));
      return interrupted.signal.aborted ? 130 : 0;
    } finally {
      await resources.close();
    }
  }
  let against: Against | undefined;
  try {
    against = options.against === undefined ? undefined : checkoutAgainst(options.against, log);
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  if (against) resources.add(async () => against.remove());
  // Each row of `service` followed by its twin on the other commit's service, when there is one.
  const twin = against && twinServer(servers, against);
  const measured = twin && against ? withTwins(selected, twin, against) : selected;
  try {
    const database = await openBenchDatabase(process.env.DATABASE_URL || undefined, log);
    resources.add(() => database.close());
    await ensureProducts(database, PRODUCTS, log);
    let seedingSeconds: number | undefined;
    if (chosen(only, SEEDING)) {
      log(`Measuring ${SEEDING} in a scratch database`);
      seedingSeconds = await measureSeeding(database, PRODUCTS);
      log(`  ${seedingSeconds.toFixed(1)} s`);
    }
    const variants = [...servers, ...(twin ? [twin] : [])].map(withRedis);
    const running = await startServers(measured, database, resources, variants, Boolean(options.allocSeconds));
    const redisPid = redis?.found ? redis.pid : undefined;
    const rows = await runScenarios(measured, running, database, { ...options, signal: interrupted.signal }, redisPid);
    const storms = await runStorms(
      stormRows.filter((row) => chosen(only, row.name)),
      database,
      interrupted.signal,
    );
    if (interrupted.signal.aborted) return 130;
    const ran = [...running.values()].map((server) => server.variant);
    console.log(report(options, rows, seedingSeconds, { postmaster: database.postmaster, redis, against }, ran, storms));
    return rows.some((row) => row.result instanceof Error || row.failures.length > 0) ||
      storms.some(([, result]) => result instanceof Error)
      ? 1
      : 0;
  } finally {
    await resources.close();
  }
}

process.exitCode = await main().catch((error: Error) => {
  console.error(`Bench failed: ${error.message}`);
  return 1;
});
