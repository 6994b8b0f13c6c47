// The database clients: one postgres.js pool with the Drizzle instance over it, and the rate limiter's
// own connection, which is thrown away and replaced when it stops answering; or, with limiter databases of
// their own (LIMITER_DATABASE_URL), such a connection and a small pool on each of them.
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres, { type Options, type Sql } from 'postgres';
import { onServer, poolStatsOf } from './driver.ts';
import { databaseIdentity } from './identity.ts';
import * as schema from './schema.ts';
import { parsePostgresUrl } from './url.ts';

export type Drizzle = PostgresJsDatabase<typeof schema>;

/**
 * A client of one connection that is replaced by a fresh one when a statement on it outlives `deadlineMs`:
 * a connection whose packets are silently dropped (a moved virtual IP, a failover) may never report an
 * error, and postgres.js statements on it may never settle.
 */
export interface OwnConnection {
  /** The current client. */
  readonly sql: Sql;
  /**
   * How long a statement may go unanswered before its connection is taken for dead: the server's own
   * `statement_timeout` on this connection plus a margin, so a connection that works has answered by then,
   * with a result or a cancellation.
   */
  readonly deadlineMs: number;
  /**
   * Whether a second statement may be sent while one is in flight (postgres.js pipelines it on the
   * connection); false behind a transaction pooler, which loses track of a pipelined exchange.
   */
  readonly pipelining: boolean;
  /**
   * The `synchronous_commit` the limiter's decisions commit with (LIMITER_SYNCHRONOUS_COMMIT); undefined: the
   * functions' own, `off` (docs/explanation/rate-limit.md, "Asynchronous commit").
   */
  readonly synchronousCommit?: SynchronousCommit;
  /**
   * Ends `stale` at once and makes a fresh client current; nothing when `stale` is no longer current.
   * Every statement queued or sent on `stale` is rejected and never sent again, on any connection.
   */
  renew(stale: Sql): void;
}

/**
 * A database the rate limiter decides on: its tables `rate_windows`, `rate_tiers` and `api_keys` and its
 * functions (docs/how-to/limiter-databases.md).
 */
export interface LimiterDatabase {
  /** `host:port/dbname` (db/identity.ts): which subjects are this database's (lib/ratelimit/shards.ts). */
  readonly identity: string;
  /** Its own connection: decisions and lease releases. */
  readonly connection: OwnConnection;
  /** A pool: housekeeping, and keys and tiers (the data pool itself when the limiter is on the data database). */
  readonly sql: Sql;
  readonly drizzle: Drizzle;
}

/**
 * A request's budget of PostgreSQL time, kept by the rate limiter (docs/explanation/budgets.md, "Statement budgets"):
 * how long its next statement may run, and what its statements used by the server's clock.
 */
/** PostgreSQL's values of synchronous_commit, from the one that waits for nothing to the one that waits most. */
export const SYNCHRONOUS_COMMIT = ['off', 'local', 'remote_write', 'on', 'remote_apply'] as const;

export type SynchronousCommit = (typeof SYNCHRONOUS_COMMIT)[number];

/** A client of the service and the server its connections are open to (Database.servers). */
export interface ServerConnections {
  /** `primary` (the data pool), `replica` (the read replica's pool) or `limiter` (the limiter's own connections). */
  readonly client: 'primary' | 'replica' | 'limiter';
  /** `host:port` of the URL's host that answers: with a host list, the primary of the moment. */
  readonly server: string;
  readonly connections: number;
}

/** A client's connections, open for the first time or after a failover, to a server of its URL (DatabaseOptions.onServer). */
interface ServerChange {
  /** What the client is: `DATABASE_URL's pool`, `the rate limiter's connection to …`, `DATABASE_READ_URL's pool`. */
  readonly client: string;
  /** `host:port` of the host now answering. */
  readonly server: string;
  /** The one that answered before; undefined for the client's first connection. */
  readonly previous: string | undefined;
}

export interface StatementBudget {
  /** Milliseconds the next statement may run: its `statement_timeout`. */
  timeoutMs(): number;
  /** A statement of the request ran for `ms` milliseconds, measured by the server, shared by `sharedBy` requests. */
  used(ms: number, sharedBy: number): void;
  /** What a statement its budget cancelled rejects with (the request's answer). */
  exceeded(): Error;
}

export interface Database {
  readonly sql: Sql;
  readonly drizzle: Drizzle;
  /**
   * The pool's `statement_timeout` in ms; undefined behind a transaction pooler, where no session setting
   * can be made, so no statement is timed or budgeted there.
   */
  readonly statementTimeoutMs: number | undefined;
  /**
   * One connection of its own to the server of `sql`, never queued behind its pool: for looking at the pool's
   * backends (whether a statement waits for a lock: db/cancel.ts). It connects when first used.
   */
  readonly watch: Sql;
  /**
   * The rate limiter's databases, in the order of DatabaseOptions.limiters: at start-up, that of their own
   * records (lib/ratelimit/record-order.ts), the first holding the keys and tiers every other copies
   * (lib/ratelimit/key-store.ts); without them, this database alone, with `limiter` as its connection and
   * the pool for the rest.
   */
  readonly limiters: readonly LimiterDatabase[];
  /**
   * The first limiter database's connection (`limiters[0].connection`). One connection for the rate limiter's decisions and lease releases (lib/ratelimit/limiter.ts keeps at most two
   * statements in flight on it, pipelined, or one behind a transaction pooler), and for readiness: they never queue behind data queries that
   * fill the pool, so the limiter keeps answering, and declining, while the collections are slow.
   */
  readonly limiter: OwnConnection;
  /**
   * The longest a request's data queries take before it is answered 503: the pool's statement timeout,
   * plus the time a query may wait for a connection of the pool (or for one that stopped answering).
   */
  readonly queryDeadlineMs: number;
  /**
   * Where collection queries run: the same database with `sql` and `drizzle` on the pool of a read replica
   * (DATABASE_READ_URL), or this database itself. Everything else (the limiter, keys, the operator API,
   * housekeeping) stays on the primary.
   */
  readonly reads: Database;
  /**
   * The servers the clients' connections are open to at this moment, by client: with a host list, the primary that
   * answers now (docs/reference/metrics.md).
   */
  servers(): readonly ServerConnections[];
  /** Closes them all, letting statements in flight finish for up to 5 s. */
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Pool size (default 10). */
  readonly max?: number;
  /** `statement_timeout` of the pool's connections, in ms (default 5000). */
  readonly statementTimeoutMs?: number;
  /** How long a data query may wait for a pool connection, in ms, on top of its own time (default 2000). */
  readonly poolTimeoutMs?: number;
  /** `statement_timeout` of the limiter's connection, in ms (default 2500). */
  readonly limiterTimeoutMs?: number;
  /**
   * `url` leads to a transaction pooler (PgBouncer, db/probe.ts): a server connection is a client's only for
   * one transaction, so no statement is named (it would be gone at the next), none is pipelined behind
   * another, and no setting is sent at connect (PgBouncer refuses `statement_timeout` there: the pooler's
   * own `query_timeout` stands in for it). Default false.
   */
  readonly pooled?: boolean;
  /** A read replica for collection queries (Database.reads), and whether a pooler leads to it. */
  readonly read?: { readonly url: string; readonly pooled?: boolean };
  /**
   * The limiter's databases (LIMITER_DATABASE_URL), none of them behind a pooler, the source of truth for
   * keys and tiers first and the others in the order changes lock them (start-up orders them by their
   * records, lib/ratelimit/record-order.ts); absent: the limiter is on `url`. Each gets a connection of its
   * own and a pool of LIMITER_POOL_SIZE.
   */
  readonly limiters?: readonly string[];
  /** The `synchronous_commit` of the limiter's decisions (OwnConnection.synchronousCommit); undefined: off. */
  readonly limiterSynchronousCommit?: SynchronousCommit;
  /**
   * Told when a client whose URL names several hosts opens a connection to a host other than the one it was open
   * to before, or for the first time: which host answers, after a failover the new primary (docs/how-to/ha-pair.md).
   */
  readonly onServer?: (change: ServerChange) => void;
}

/** A limiter database's pool: housekeeping, the operator API's writes and key issuing, all rare. */
const LIMITER_POOL_SIZE = 2;

/** What a connection that works needs beyond the server's statement_timeout to report the cancellation. */
const DEADLINE_MARGIN_MS = 1000;

/** The options postgres.js needs for a connection that a transaction pooler hands out, or for one of its own. */
function connectionOptions(pooled: boolean, applicationName: string, statementTimeoutMs: number) {
  return pooled
    ? // max_pipeline 0: a connection takes its next statement once the last one has answered (1 would let one
      // more go behind it). Nothing here uses sql.begin(), which needs pipelining on.
      { prepare: false, max_pipeline: 0, connection: { application_name: applicationName } }
    : { connection: { application_name: applicationName, statement_timeout: statementTimeoutMs } };
}

export function openDatabase(url: string, options: DatabaseOptions = {}): Database {
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000;
  const limiterTimeoutMs = options.limiterTimeoutMs ?? 2500;
  const pooled = options.pooled ?? false;
  const common = {
    // int8 values (counts, ids, the limiter's seconds and lease tokens) arrive as JS numbers rather than
    // strings: the one place bigints become numbers. Every one this service reads is far below 2^53.
    types: { int8: { to: 20, from: [20], serialize: (n: number) => String(n), parse: (text: string) => Number(text) } },
    // A database that is away must turn into a quick 503, not a hanging request.
    connect_timeout: 2,
    // postgres.js waits up to 20 s between reconnection attempts after failures (3^n / 100 s), and
    // queues queries meanwhile: a database that is back would stay unused for that long. Retry
    // within a tenth of a second, so a database that is away is a quick 503 and one that is back is
    // used: the first 200 must come within 1 s of the database accepting connections again, and on a
    // loaded machine a quarter of a second of waiting left too little of it (docs/explanation/faults.md, "When
    // the database is away").
    backoff: (retries: number) => Math.min(0.05 * retries, 0.1),
    idle_timeout: 30,
    onnotice: () => {},
  } satisfies Options<Record<string, postgres.PostgresType>>;
  // The server cancels a data query that runs (or waits for a lock) longer than statementTimeoutMs: a 503, not a hang.
  const pool = (poolUrl: string, poolPooled: boolean, client: string) =>
    postgres(poolUrl, {
      ...common,
      ...watchServer(poolUrl, client, options.onServer),
      max: options.max ?? 10,
      ...connectionOptions(poolPooled, 'collections', statementTimeoutMs),
    });
  const sql = pool(url, pooled, "DATABASE_URL's pool");
  const limiterConnection = (limiterUrl: string, limiterPooled: boolean) => {
    // One watch for the connection and those that replace it: a renewal is no change of server.
    const watched = watchServer(limiterUrl, `The rate limiter's connection to ${databaseIdentity(limiterUrl)}`, options.onServer);
    return ownConnection(
      () =>
        postgres(limiterUrl, {
          ...common,
          ...watched,
          max: 1,
          // postgres.js 3.4.9 fetches the array types after every (re)connection, and a connection ended or
          // broken during that fetch leaves a promise rejected with no handler, which ends the process: this
          // connection is renewed while it reconnects. The limiter sends its arrays as literals instead.
          fetch_types: false,
          // A decision the limiter has given up on must not be made much later, behind a lock.
          ...connectionOptions(limiterPooled, 'collections-limiter', limiterTimeoutMs),
        }),
      limiterTimeoutMs + DEADLINE_MARGIN_MS,
      !limiterPooled,
      options.limiterSynchronousCommit === 'off' ? undefined : options.limiterSynchronousCommit,
    );
  };
  const limiters = options.limiters
    ? options.limiters.map((limiterUrl) => {
        const limiterSql = postgres(limiterUrl, {
          ...common,
          max: LIMITER_POOL_SIZE,
          ...connectionOptions(false, 'collections-limiter-pool', statementTimeoutMs),
        });
        return {
          identity: databaseIdentity(limiterUrl),
          connection: limiterConnection(limiterUrl, false),
          sql: limiterSql,
          drizzle: drizzle(limiterSql, { schema }),
        };
      })
    : [{ identity: databaseIdentity(url), connection: limiterConnection(url, pooled), sql, drizzle: drizzle(sql, { schema }) }];
  const readSql = options.read ? pool(options.read.url, options.read.pooled ?? false, "DATABASE_READ_URL's pool") : undefined;
  // Kept open once made (no idle timeout): a cancel must not wait for a connection to be made, on cores a
  // storm's statements keep busy (db/cancel.ts).
  const watchOf = (watchUrl: string) =>
    postgres(watchUrl, { ...common, max: 1, idle_timeout: 0, fetch_types: false, connection: { application_name: 'collections-watch' } });
  const watch = watchOf(url);
  const readWatch = options.read ? watchOf(options.read.url) : watch;
  const shared = {
    limiters,
    limiter: limiters[0]!.connection,
    queryDeadlineMs: statementTimeoutMs + (options.poolTimeoutMs ?? 2000),
    servers() {
      const clients: [ServerConnections['client'], Sql][] = [
        ['primary', sql],
        ...(readSql === undefined ? [] : [['replica', readSql] as [ServerConnections['client'], Sql]]),
        ...limiters.map((limiter) => ['limiter', limiter.connection.sql] as [ServerConnections['client'], Sql]),
      ];
      const counted = new Map<string, ServerConnections>();
      for (const [client, clientSql] of clients) {
        for (const [server, connections] of Object.entries(poolStatsOf(clientSql)?.().servers ?? {})) {
          const key = `${client} ${server}`;
          counted.set(key, { client, server, connections: (counted.get(key)?.connections ?? 0) + connections });
        }
      }
      return [...counted.values()];
    },
    async close() {
      const own = options.limiters ? limiters.map((limiter) => limiter.sql.end({ timeout: 5 })) : [];
      await Promise.all([
        sql.end({ timeout: 5 }),
        ...limiters.map((limiter) => limiter.connection.close()),
        ...own,
        readSql?.end({ timeout: 5 }),
        watch.end({ timeout: 1 }),
        readWatch === watch ? undefined : readWatch.end({ timeout: 1 }),
      ]);
    },
  };
  let reads: Database;
  const on = (client: Sql, clientPooled: boolean, clientWatch: Sql): Database => ({
    ...shared,
    statementTimeoutMs: clientPooled ? undefined : statementTimeoutMs,
    sql: client,
    watch: clientWatch,
    drizzle: drizzle(client, { schema }),
    get reads() {
      return reads;
    },
  });
  const database = on(sql, pooled, watch);
  reads = readSql ? on(readSql, options.read?.pooled ?? false, readWatch) : database;
  return database;
}

/**
 * The option that tells `onServer` of a client's connections opened to another host than before: for a URL with a
 * host list only, where the answering host can change; nothing otherwise.
 */
function watchServer(url: string, client: string, tell: DatabaseOptions['onServer']): object {
  if (tell === undefined || parsePostgresUrl(url).hosts.length < 2) return {};
  let last: string | undefined;
  return onServer((server) => {
    if (server === last) return;
    const previous = last;
    last = server;
    tell({ client, server, previous });
  });
}

function ownConnection(
  open: () => Sql,
  deadlineMs: number,
  pipelining: boolean,
  synchronousCommit: SynchronousCommit | undefined,
): OwnConnection & { close(): Promise<void> } {
  let current = open();
  let closed = false;
  return {
    get sql() {
      return current;
    },
    deadlineMs,
    pipelining,
    ...(synchronousCommit === undefined ? {} : { synchronousCommit }),
    renew(stale) {
      if (stale !== current || closed) return;
      current = open();
      // end() with a zero timeout terminates the connection: what was sent on it, what waits to be sent
      // and a statement held for a reconnection are all rejected (CONNECTION_DESTROYED), none is sent.
      stale.end({ timeout: 0 }).catch(() => {});
    },
    close() {
      closed = true;
      return current.end({ timeout: 5 });
    },
  };
}
