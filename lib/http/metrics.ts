// Prometheus metrics (prom-client): one registry per app, recorded on the request path, served at /metrics.
import type { Sql } from 'postgres';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** What postgres.js tells of its pool, through the service's patch (patches/README.md); absent without it. */
interface PoolStats {
  /** Connections open (or opening). */
  readonly open: number;
  /** Connections with a statement running (or opening for one). */
  readonly inUse: number;
  /** Statements not running yet: queued for a connection, or pipelined behind another on one. */
  readonly waiting: number;
}

/** Why a request was answered 503 (docs/operations.md, "Metrics"). */
export type UnavailableCause = 'limiter' | 'query' | 'readiness' | 'draining';

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
}

// Seconds: from a cheap chunk up to a deep offset, and past the query deadline.
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// A decision is one round trip plus the statements ahead of it, up to its deadline (2.5 s).
const DECISION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5];
const BATCH_BUCKETS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256];

/**
 * The registry and its metrics. `pools` are the clients of data queries by name (`primary`, and `replica`
 * when collection queries go to one), whose state is read at each scrape.
 */
export function createMetrics(pools: Readonly<Record<string, Sql>>): Metrics {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'Requests answered, by route, method and status',
    labelNames: ['route', 'method', 'status'],
    registers,
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from a request reaching the app to its response, by route',
    labelNames: ['route'],
    buckets: REQUEST_BUCKETS,
    registers,
  });
  const refused = new Counter({
    name: 'http_refused_total',
    help: 'Requests answered before the app saw them, by what was wrong with them (docs/operations.md, "Metrics")',
    labelNames: ['reason'],
    registers,
  });
  const unavailable = new Counter({
    name: 'http_unavailable_total',
    help: '503 answers, by cause: limiter (no decision), query (data phase), readiness (/readyz), draining (/readyz after a stop signal)',
    labelNames: ['cause'],
    registers,
  });
  const decisions = new Counter({
    name: 'ratelimit_decisions_total',
    help: 'Rate-limit decisions, by outcome: ok, rate, concurrency, invalid_key',
    labelNames: ['outcome'],
    registers,
  });
  const decisionSeconds = new Histogram({
    name: 'ratelimit_decision_duration_seconds',
    help: 'How long a request waited for its rate-limit decision',
    buckets: DECISION_BUCKETS,
    registers,
  });
  const statementDecisions = new Histogram({
    name: 'ratelimit_statement_requests',
    help: 'Requests decided per limiter statement (0: lease releases only); its _count is the statements sent',
    buckets: BATCH_BUCKETS,
    registers,
  });
  const stats = Object.entries(pools).flatMap(([name, sql]) => {
    const read = (sql as Sql & { poolStats?: () => PoolStats }).poolStats;
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
  return {
    registry,
    request(route, method, status, seconds) {
      requests.inc({ route, method: methodLabel(method), status });
      duration.observe({ route }, seconds);
    },
    refused(reason, method, status) {
      requests.inc({ route: 'refused', method: methodLabel(method), status });
      refused.inc({ reason });
    },
    unavailable(cause) {
      unavailable.inc({ cause });
    },
    decided(outcome, seconds) {
      decisions.inc({ outcome });
      decisionSeconds.observe(seconds);
    },
    statement(count) {
      statementDecisions.observe(count);
    },
  };
}
