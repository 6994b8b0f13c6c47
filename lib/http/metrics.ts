// Prometheus metrics (prom-client): one registry per app, served at /metrics. What the request path records is
// added up here, per label set, and handed to prom-client when /metrics is read: prom-client's own inc() and
// observe() check and hash the label set at every call, a cost on every request for what is read every few
// seconds at most.
import type { Sql } from 'postgres';
import { Counter, collectDefaultMetrics, Gauge, type MetricObjectWithValues, type MetricValue, Registry } from 'prom-client';
import type { ServerConnections } from '../../db/client.ts';
import { poolStatsOf } from '../../db/driver.ts';

/** Why a request was answered 503 (docs/reference/metrics.md). */
export type UnavailableCause = 'limiter' | 'query' | 'collection' | 'readiness' | 'draining';

/** What is served, read at each scrape: which generation of the collections file and catalog, and what of it is unavailable. */
export interface ServedState {
  readonly generation: number;
  readonly hash: string;
  readonly unavailable: Iterable<string>;
  /** Reloads of the file and the catalog so far, by how they ended. */
  readonly reloads: Readonly<Record<'changed' | 'unchanged' | 'failed', number>>;
}

/**
 * The methods a label may name; any other is `other`. Deno hands the app any token a client sends as its
 * method, and Node's parser some thirty (WebDAV's, PURGE...): a label each would let clients create series.
 */
const LABELLED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE']);

/** A request's method as a metric label: one of the standard ones, or `other`. */
function methodLabel(method: string | undefined): string {
  return method !== undefined && LABELLED_METHODS.has(method) ? method : 'other';
}

export interface Metrics {
  readonly registry: Registry;
  /** One request answered: `route` is the Hono route that answered it (`/v1/:collection`), never the raw path. */
  request(route: string, method: string, status: number, seconds: number): void;
  /**
   * A request answered before the app saw it (lib/http/refused.ts): counted under the route `refused`, and
   * by `reason`, one of a fixed set. `method`: absent when the request line itself could not be read.
   */
  refused(reason: string, method: string | undefined, status: number): void;
  unavailable(cause: UnavailableCause): void;
  /** A rate-limit decision: its outcome, and how long the request waited for it. */
  decided(outcome: string, seconds: number): void;
  /** A limiter statement sent, carrying `decisions` decisions (0: releases only). */
  statement(decisions: number): void;
  /** A request held before its decision, its client declined over its allowance within the second. */
  held(): void;
}

type LabelValue = string | number;

interface Tallied {
  readonly labels: Record<string, LabelValue>;
  n: number;
}

/**
 * A counter's increments since the last scrape, per label set: found in nested maps, one level per label
 * (at most three), so that counting allocates nothing once a label set has been seen; its prom-client Counter
 * takes them when a scrape collects it.
 */
class CounterTally {
  private readonly root = new Map<LabelValue, unknown>();
  private readonly entries: Tallied[] = [];
  private readonly names: readonly string[];

  constructor(names: readonly string[]) {
    this.names = names;
  }

  /** Hands the counts since the last scrape to `counter` (from its collect(), at a scrape). */
  drain(counter: Counter<string>): void {
    for (const entry of this.entries) {
      if (entry.n === 0) continue;
      counter.inc(entry.labels, entry.n);
      entry.n = 0;
    }
  }

  /** Counts one under the label values, in the order of the names given at construction. */
  inc(a: LabelValue, b?: LabelValue, c?: LabelValue): void {
    const depth = this.names.length;
    let level = this.root;
    if (depth > 1) level = this.level(level, a);
    if (depth > 2) level = this.level(level, b!);
    const last = depth === 1 ? a : depth === 2 ? b! : c!;
    let entry = level.get(last) as Tallied | undefined;
    if (entry === undefined) {
      const values = [a, b, c];
      const labels: Record<string, LabelValue> = {};
      this.names.forEach((name, at) => {
        labels[name] = values[at]!;
      });
      entry = { labels, n: 0 };
      this.entries.push(entry);
      level.set(last, entry);
    }
    entry.n++;
  }

  private level(parent: Map<LabelValue, unknown>, value: LabelValue): Map<LabelValue, unknown> {
    let next = parent.get(value) as Map<LabelValue, unknown> | undefined;
    if (next === undefined) {
      next = new Map();
      parent.set(value, next);
    }
    return next;
  }
}

/** One label set's observations: a count per bucket (not cumulative), their sum and number. */
interface Observed {
  readonly labels: Record<string, string>;
  readonly counts: number[];
  sum: number;
  count: number;
}

/**
 * A histogram kept as plain counts per label set, and read by prom-client's registry as any of its metrics is
 * (its `get()`), in the same exposition as prom-client's Histogram: cumulative `_bucket` samples up to `+Inf`,
 * then `_sum` and `_count`. At most one label, whose values are few (a route).
 */
class AggregatedHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly buckets: readonly number[];
  private readonly label: string | undefined;
  private readonly sets = new Map<string, Observed>();

  constructor(options: { name: string; help: string; buckets: readonly number[]; label?: string; registry: Registry }) {
    this.name = options.name;
    this.help = options.help;
    this.buckets = options.buckets;
    this.label = options.label;
    options.registry.registerMetric(this as never);
  }

  observe(value: number, labelValue = ''): void {
    let set = this.sets.get(labelValue);
    if (set === undefined) {
      set = { labels: this.label === undefined ? {} : { [this.label]: labelValue }, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.sets.set(labelValue, set);
    }
    // The first bucket whose upper bound holds the value; past the last, only +Inf (the count) holds it.
    let at = 0;
    while (at < this.buckets.length && value > this.buckets[at]!) at++;
    if (at < this.buckets.length) set.counts[at]!++;
    set.sum += value;
    set.count++;
  }

  async get(): Promise<Omit<MetricObjectWithValues<MetricValue<string>>, 'collect'>> {
    const values: MetricValue<string>[] = [];
    for (const set of this.sets.values()) {
      let cumulative = 0;
      this.buckets.forEach((le, at) => {
        cumulative += set.counts[at]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { le, ...set.labels }, value: cumulative } as MetricValue<string>);
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...set.labels }, value: set.count } as MetricValue<string>);
      values.push({ metricName: `${this.name}_sum`, labels: set.labels, value: set.sum } as MetricValue<string>);
      values.push({ metricName: `${this.name}_count`, labels: set.labels, value: set.count } as MetricValue<string>);
    }
    return { name: this.name, help: this.help, type: 'histogram' as never, values, aggregator: 'sum' };
  }

  reset(): void {
    this.sets.clear();
  }
}

// Seconds: from a cheap chunk up to a deep offset, and past the query deadline.
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// A decision is one round trip plus the statements ahead of it, up to its deadline (2.5 s).
const DECISION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5];
const BATCH_BUCKETS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256];

/**
 * The registry and its metrics. `pools` are the clients of data queries by name (`primary`, and `replica`
 * when collection queries go to one), whose state is read at each scrape, as is what is `served`, and `servers`:
 * which host each client's connections are open to (Database.servers).
 */
export function createMetrics(
  pools: Readonly<Record<string, Sql>>,
  served?: () => ServedState,
  servers?: () => readonly ServerConnections[],
): Metrics {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  const requestCounts = new CounterTally(['route', 'method', 'status']);
  new Counter({
    name: 'http_requests_total',
    help: 'Requests answered, by route, method and status',
    labelNames: ['route', 'method', 'status'],
    registers,
    collect() {
      requestCounts.drain(this);
    },
  });
  const duration = new AggregatedHistogram({
    name: 'http_request_duration_seconds',
    help: 'Time from a request reaching the app to its response, by route',
    label: 'route',
    buckets: REQUEST_BUCKETS,
    registry,
  });
  const refused = new Counter({
    name: 'http_refused_total',
    help: 'Requests answered before the app saw them, by what was wrong with them (docs/reference/metrics.md)',
    labelNames: ['reason'],
    registers,
  });
  const unavailable = new Counter({
    name: 'http_unavailable_total',
    help: '503 answers, by cause: limiter (no decision), query (data phase), collection (collection_unavailable), readiness (/readyz), draining (/readyz after a stop signal)',
    labelNames: ['cause'],
    registers,
  });
  const decisionCounts = new CounterTally(['outcome']);
  new Counter({
    name: 'ratelimit_decisions_total',
    help: 'Rate-limit decisions, by outcome: ok, rate, concurrency, invalid_key',
    labelNames: ['outcome'],
    registers,
    collect() {
      decisionCounts.drain(this);
    },
  });
  const decisionSeconds = new AggregatedHistogram({
    name: 'ratelimit_decision_duration_seconds',
    help: 'How long a request waited for its rate-limit decision',
    buckets: DECISION_BUCKETS,
    registry,
  });
  const statementDecisions = new AggregatedHistogram({
    name: 'ratelimit_statement_requests',
    help: 'Requests decided per limiter statement (0: lease releases only); its _count is the statements sent',
    buckets: BATCH_BUCKETS,
    registry,
  });
  const held = new Counter({
    name: 'ratelimit_held_total',
    help: 'Requests held before their decision, their client declined over its allowance within the second before',
    registers,
  });
  const stats = Object.entries(pools).flatMap(([name, sql]) => {
    // What postgres.js tells of its pool, through the service's patch (patches/README.md).
    const read = poolStatsOf(sql);
    return read === undefined ? [] : [{ pool: name, read }];
  });
  if (stats.length > 0) {
    new Gauge({
      name: 'db_pool_connections',
      help: 'Open connections of a data queries pool (primary, replica), by state: in_use (running a statement), idle',
      labelNames: ['pool', 'state'],
      registers,
      collect() {
        for (const { pool, read } of stats) {
          const now = read();
          this.set({ pool, state: 'in_use' }, now.inUse);
          this.set({ pool, state: 'idle' }, now.open - now.inUse);
        }
      },
    });
    new Gauge({
      name: 'db_pool_queries_waiting',
      help: 'Data queries not running yet, by pool: waiting for a connection, or pipelined behind another statement on one',
      labelNames: ['pool'],
      registers,
      collect() {
        for (const { pool, read } of stats) this.set({ pool }, read().waiting);
      },
    });
  }
  if (served !== undefined) {
    new Gauge({
      name: 'collections_generation',
      help: 'The generation of the collections file and catalog served (1 at start-up, one more at each reload that changed it), labelled with its hash',
      labelNames: ['hash'],
      registers,
      collect() {
        const { generation, hash } = served();
        this.reset();
        this.set({ hash }, generation);
      },
    });
    new Gauge({
      name: 'collections_unavailable',
      help: 'Collections of the file the catalog does not serve as it says, answered 503 collection_unavailable: 1 each, by collection',
      labelNames: ['collection'],
      registers,
      collect() {
        this.reset();
        for (const collection of served().unavailable) this.set({ collection }, 1);
      },
    });
    new Counter({
      name: 'collections_reloads_total',
      help: 'Readings of the collections file and catalog after start-up, by result: changed, unchanged, failed (the last good kept)',
      labelNames: ['result'],
      registers,
      collect() {
        this.reset();
        for (const [result, count] of Object.entries(served().reloads)) this.inc({ result }, count);
      },
    });
  }
  if (servers !== undefined) {
    new Gauge({
      name: 'db_server_connections',
      help: 'Open connections by client (primary, replica, limiter) and the server (host:port of its URL) they are open to: with a host list, the primary that answers',
      labelNames: ['pool', 'server'],
      registers,
      collect() {
        // A server no connection is open to any more (the old primary, after a failover) is no series.
        this.reset();
        for (const { client, server, connections } of servers()) this.set({ pool: client, server }, connections);
      },
    });
  }
  return {
    registry,
    request(route, method, status, seconds) {
      requestCounts.inc(route, methodLabel(method), status);
      duration.observe(seconds, route);
    },
    refused(reason, method, status) {
      requestCounts.inc('refused', methodLabel(method), status);
      refused.inc({ reason });
    },
    unavailable(cause) {
      unavailable.inc({ cause });
    },
    decided(outcome, seconds) {
      decisionCounts.inc(outcome);
      decisionSeconds.observe(seconds);
    },
    statement(count) {
      statementDecisions.observe(count);
    },
    held() {
      held.inc();
    },
  };
}
