// What a row of `npm run bench` is: the scenario it runs and the ratios printed below the table. A module of
// its own so that the files holding rows (bench/scenarios.ts, bench/limiter-scenarios.ts, bench/sizes.ts)
// import the shape, never each other's rows for it (no import cycle: npm run lint:layers).
import type autocannon from 'autocannon';
import type { Sql } from 'postgres';

/** What a scenario sends. `requests` (autocannon's request list) wins over `path` and `headers`. */
export interface Load {
  /** Path and query, e.g. `/v1/products?page=0`; the host is always the target server on 127.0.0.1. */
  path?: string;
  headers?: Record<string, string>;
  /** A request generator: each request may rewrite itself from the previous response (`setupRequest`, `onResponse`). */
  requests?: autocannon.Request[];
}

export interface ScenarioContext {
  /** The target server, `http://127.0.0.1:<port>`. */
  readonly origin: string;
  /** A connection to the bench database, e.g. to insert a key or change a tier. */
  readonly sql: Sql;
}

export interface Scenario extends Load {
  name: string;
  /** The `name` of an entry in `servers`. */
  server: string;
  /** Runs after the server is up and before the warm-up; what it returns is merged into the load. */
  setup?: (context: ScenarioContext) => Promise<Load | undefined>;
  /** Clients sending at once (autocannon connections); default `--connections`. */
  connections?: number;
  /** The status a probe request must get before the row is measured (default 200), so a typo is not benchmarked. */
  expectStatus?: number;
  /** The row the others are divided by; exactly one scenario is the baseline. */
  baseline?: boolean;
}

/**
 * What a comparison divides: req/s, time per request (the inverse), CPU per request (the server's, PostgreSQL's
 * and, for a server that keeps its state in Redis, Redis's), the server's or PostgreSQL's alone, or the bytes
 * the server allocates per request (measured with `--against` or `--allocations` only).
 */
export type RatioMeasure = 'req/s' | 'time/req' | 'cpu/req' | 'server/req' | 'pg/req' | 'alloc/req';

/**
 * A ratio of two rows printed below the table (`of` / `to`, rows named by scenario name), with the target
 * it is held to, if any: e.g. the service's req/s divided by the floor's, at least 1.0.
 */
export interface Comparison {
  label: string;
  of: string;
  to: string;
  target?: { measure: RatioMeasure; atLeast?: number; atMost?: number };
}
