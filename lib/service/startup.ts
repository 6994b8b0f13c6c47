// Start-up shared by the Node, Deno and Bun entries: the database (embedded or DATABASE_URL), the service's schema
// (its migrations) where its state lives, what is served (COLLECTIONS: a file read against the catalog, or the demo,
// which the entry hands in), the cursor secret, then the pools and the app.
import { readFile } from 'node:fs/promises';
import { drizzle } from 'drizzle-orm/postgres-js';
import type { Context } from 'hono';
import postgres, { type Sql } from 'postgres';
import { type Database, openDatabase } from '../../db/client.ts';
import { resolveDatabaseUrl } from '../../db/embedded.ts';
import { databaseIdentity, recordIdentity } from '../../db/identity.ts';
import { earlierCursorSecret, runMigrations } from '../../db/migrate.ts';
import { pooledByUrl, probeServer } from '../../db/probe.ts';
import * as schema from '../../db/schema.ts';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';
import { CollectionsFileError } from '../collections/problems.ts';
import { withTimeout } from '../http/deadline.ts';
import { createLogger, type Logger } from '../http/logger.ts';
import { loadCursorSecret } from '../pagination/cursor-secret.ts';
import { loadServed, type Served } from '../pagination/runtime.ts';
import { syncKeysAndTiers } from '../ratelimit/key-store.ts';
import { inRecordOrder } from '../ratelimit/record-order.ts';
import { type App, buildApp } from './app.ts';
import { type Config, ConfigError, parseConfig } from './config.ts';
import { listenForReloads, RELOAD_CHANNEL } from './reload-listener.ts';
import { LiveCollections, unavailableLine } from './served-collections.ts';

export interface Service {
  readonly app: App;
  readonly database: Database;
  /** Reads the collections file and the catalog again (SIGHUP: docs/how-to/schema-changes.md); `reason` says why in the log. */
  reload(reason: string): void;
  /** Closes the pools, then stops the embedded PostgreSQL if this process started it. */
  release(): Promise<void>;
  /** Last words before the process exits in a hurry: stops the embedded PostgreSQL's server at once. */
  abandon(): void;
}

/**
 * The demo (demo/), handed in by the entries (server.ts, server.deno.ts, server.bun.ts): lib/ never imports it. It
 * is served where COLLECTIONS=demo, and on the embedded default.
 */
interface Demo {
  /** Makes its tables on `url`'s database (or moves an earlier release's from public) and seeds those that are empty. */
  prepare(url: string, log: (line: string) => void): Promise<void>;
  /** Its collections file, served as any other (COLLECTIONS=path). */
  readonly file: string;
}

export interface StartOptions {
  /** Start-up lines at info, the autovacuum warning at warn, then a line per request (lib/http/exchange.ts). */
  readonly logger: Logger;
  /** True once a stop signal came: /readyz fails (lib/http/shutdown.ts); never, by default. */
  readonly draining?: () => boolean;
  /** The socket's peer address as the runtime reports it (Node's by default: lib/http/forwarding.ts). */
  readonly remoteAddress?: (c: Context) => string | undefined;
  /** The demo, served where COLLECTIONS asks for it (or on the embedded default); an entry without one refuses it. */
  readonly demo?: Demo;
}

/** The configuration, or the process ends with the one line that names the bad variable. */
function readConfig(env: Record<string, string | undefined>): Config {
  try {
    return parseConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
}

/**
 * One warning line when the PostgreSQL server runs with autovacuum off (a server setting, not one of a
 * database): the rate limiter rewrites a row of `rate_windows` on every request, and without autovacuum
 * nothing removes the dead versions, so the table and every decision's work keep growing
 * (docs/how-to/own-database.md, "Autovacuum").
 */
async function warnWithoutAutovacuum(sql: Sql, logger: Logger): Promise<void> {
  const [row] = await sql`select current_setting('autovacuum') as autovacuum`;
  if (row?.autovacuum !== 'on') {
    logger.warn(
      `autovacuum is ${row?.autovacuum ?? 'unknown'} on this PostgreSQL server; the rate limiter's table rate_windows needs it, or its dead rows pile up and slow every request (docs/how-to/own-database.md, "Autovacuum")`,
    );
  }
}

/**
 * The URL for session-level work must reach the primary itself: a migration holds an advisory lock for its
 * session, which a transaction pooler would leave on a server connection that others then get (they wait
 * for it for good), and a standby refuses every write.
 */
async function checkDirect(url: string, name: string): Promise<void> {
  const server = await probeServer(url);
  if (server.pooler) {
    throw new Error(`${name} leads to a connection pooler; set DATABASE_DIRECT_URL to the database itself, for migrations and seeding`);
  }
  if (server.standby) {
    throw new Error(
      `${name} leads to a standby, which refuses writes; set DATABASE_URL to the primary and DATABASE_READ_URL to the standby`,
    );
  }
}

/**
 * A limiter database must be the database itself: the limiter keeps a connection of its own there and
 * pipelines on it, its migrations hold a session's advisory lock, and every decision writes.
 */
async function checkLimiter(url: string): Promise<void> {
  const server = await probeServer(url);
  const identity = databaseIdentity(url);
  if (server.pooler) throw new Error(`LIMITER_DATABASE_URL names a connection pooler (${identity}); name the database itself`);
  if (server.standby) throw new Error(`LIMITER_DATABASE_URL names a standby (${identity}), which refuses writes; name the primary`);
}

/** Runs `work` on a session of one connection to `url`, closed after. */
async function onSession<T>(url: string, work: (session: Sql) => Promise<T>): Promise<T> {
  const session = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await work(session);
  } finally {
    await session.end();
  }
}

/** Whether a transaction pooler leads to `url`: the URL's `prepare` says so, or the server is asked. */
async function pooled(url: string): Promise<boolean> {
  return pooledByUrl(url) ?? (await probeServer(url)).pooler;
}

/** A start-up failure as the one line an operator reads: a stack trace tells them nothing more. */
export function describeFailure(error: unknown, port: number): string {
  const { code, syscall, message } = error as NodeJS.ErrnoException;
  if (syscall === 'listen' && code === 'EADDRINUSE') return `port ${port} is in use: set PORT to a free one`;
  if (syscall === 'listen' && code === 'EACCES') return `port ${port} needs privileges: set PORT to 1024 or above`;
  // postgres.js reports a refused connection to "localhost" as an AggregateError with no message.
  return message || code || String(error);
}

/** Everything up to serving: rejects with an Error whose message is the one line an operator reads. */
async function startService(config: Config, options: StartOptions): Promise<Service> {
  const { logger } = options;
  const log = (line: string) => logger.info(line);
  const postgresServer = await resolveDatabaseUrl(config.databaseUrl, log);
  const url = postgresServer.url;
  const directUrl = config.databaseDirectUrl ?? url;
  await checkDirect(directUrl, config.databaseDirectUrl ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL');
  // What is served, first: a file that cannot be served stops start-up before anything is written anywhere.
  const toServe = await collectionsToServe(config, options.demo, {
    directUrl,
    readUrl: config.databaseReadUrl ?? url,
    log,
    warn: (line) => logger.warn(line),
  });
  // The service's state (its schema: keys, tiers, limiter, cursor secret) lives on the limiter databases when there
  // are any (LIMITER_DATABASE_URL), and the data database then gets nothing of it: its role needs only SELECT on
  // what is served (docs/how-to/limiter-databases.md). Without them, it lives on the data database.
  const limiterUrls = config.limiterDatabaseUrls;
  for (const limiterUrl of limiterUrls ?? []) await checkLimiter(limiterUrl);
  for (const stateUrl of limiterUrls ?? [directUrl]) await runMigrations(stateUrl);
  // rate_windows, which needs autovacuum, is where the limiter is.
  for (const stateUrl of limiterUrls ?? [directUrl]) await onSession(stateUrl, (session) => warnWithoutAutovacuum(session, logger));
  // The limiter databases by their own records, not by the list's order: the first is the source of truth
  // for keys, tiers and the cursor secret, and changes lock them in this order, at every instance alike (record-order.ts).
  const recorded = [];
  for (const limiterUrl of limiterUrls ?? []) recorded.push({ url: limiterUrl, record: await onSession(limiterUrl, recordIdentity) });
  const limiterOrder = limiterUrls === undefined ? undefined : inRecordOrder(recorded);
  const stateUrl = limiterOrder?.[0] ?? directUrl;
  // An earlier release kept the secret on the data database; the limiter databases take it over, once.
  const inherited = limiterOrder === undefined ? undefined : () => earlierCursorSecret(directUrl);
  const cursorSecret = await onSession(stateUrl, (session) =>
    loadCursorSecret(drizzle(session, { schema }), config.cursorSecret, inherited),
  );

  // The direct URL was found to be no pooler: DATABASE_URL, when it is the same, need not be asked again.
  const isPooled = directUrl === url ? (pooledByUrl(url) ?? false) : await pooled(url);
  const readUrl = config.databaseReadUrl;
  const database = openDatabase(url, {
    max: config.databasePoolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    poolTimeoutMs: config.poolTimeoutMs,
    pooled: isPooled,
    read: readUrl === undefined ? undefined : { url: readUrl, pooled: await pooled(readUrl) },
    limiters: limiterOrder,
    limiterSynchronousCommit: config.limiterSynchronousCommit,
    // With a host list, which host answers, and after a failover the new one (docs/how-to/ha-pair.md).
    onServer: ({ client, server, previous }) =>
      previous === undefined
        ? logger.info(`${client} is open to ${server}`)
        : logger.warn(`${client} is open to ${server} now, no longer to ${previous}: the primary moved (a failover or a switchover)`),
  });
  if (isPooled) log('DATABASE_URL leads to a transaction pooler: no named statements, no pipelining');
  // The watch connections, which cancel the statements their budgets cut short, made now rather than at the
  // first cancel (a pooler's are never used: no statement is budgeted there); one that fails is made then.
  else await Promise.all([...new Set([database.watch, database.reads.watch])].map((watch) => watch`select 1`.catch(() => {})));
  if (limiterOrder !== undefined) {
    log(
      `Rate limiter on ${database.limiters.map((limiter) => limiter.identity).join(', ')}; keys and tiers from ${database.limiters[0]!.identity}, the oldest by its record`,
    );
    try {
      for (const identity of await syncKeysAndTiers(database.limiters)) log(`Keys and tiers copied to ${identity}`);
    } catch (error) {
      await database.close();
      throw error;
    }
  }
  const collections = new LiveCollections(toServe.served, { read: toServe.read, logger, source: toServe.source });
  const app = buildApp({
    database,
    config,
    registry: collections,
    cursorSecret,
    rateLimit: { holdMs: config.limiterHoldMs },
    remoteAddress: options.remoteAddress,
    logger,
    draining: options.draining,
  });
  // NOTIFY on the direct URL, which is the database itself (checkDirect): LISTEN needs a session of its own.
  const listener = await listenForReloads({
    url: directUrl,
    notified: (payload) => collections.reload(`NOTIFY ${RELOAD_CHANNEL}${payload === '' ? '' : ` '${payload.slice(0, 100)}'`}`),
    resumed: () => collections.reload(`the connection listening on ${RELOAD_CHANNEL} was made again`),
    warn: (line) => logger.warn(line),
    log,
  });
  return {
    app,
    database,
    reload: (reason) => collections.reload(reason),
    async release() {
      collections.close();
      await listener.close();
      await database.close();
      await postgresServer.stop();
    },
    abandon: () => postgresServer.abandon(),
  };
}

/** What COLLECTIONS serves: its first reading, how its file is named, and how it is read again. */
interface ToServe {
  readonly served: Served;
  readonly source: string;
  /** Reads the file and the catalog again, as at start-up: a reload (lib/service/served-collections.ts). */
  read(earlier: Served): Promise<Served>;
}

/** The longest a reload may take to read the file and the catalog before it fails, keeping what is served. */
const RELOAD_READ_MS = 10_000;

/**
 * What COLLECTIONS asks for: the demo (its tables made and seeded on the direct URL), or a collections file,
 * resolved against the catalog as the data connection's role sees it (on the read URL when there is one, which
 * serves the reads). A file that does not parse or is wrong in itself stops start-up here, as does one of which
 * no collection can be served; a collection the catalog does not serve as the file says (a missing relation or
 * column, one the role may not SELECT) is logged by name and left unavailable, and the others are served.
 */
async function collectionsToServe(
  config: Config,
  demo: Demo | undefined,
  urls: { directUrl: string; readUrl: string; log: (line: string) => void; warn: (line: string) => void },
): Promise<ToServe> {
  const { collections } = config;
  if (collections.kind === 'demo') {
    if (demo === undefined) throw new Error('COLLECTIONS=demo: this entry has no demo to serve; name a collections file');
    await demo.prepare(urls.directUrl, urls.log);
  }
  // The demo's catalog is read where its tables were just made: a replica may not have them yet.
  const { path, source, catalogUrl } =
    collections.kind === 'demo'
      ? { path: demo!.file, source: 'the demo (demo/collections.yaml)', catalogUrl: urls.directUrl }
      : { path: collections.path, source: collections.path, catalogUrl: urls.readUrl };
  const read = async (earlier?: Served): Promise<Served> => {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      throw new Error(`COLLECTIONS=${path}: the file cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    // prepare: false, as a transaction pooler needs; one catalog read, in one snapshot.
    const session = postgres(catalogUrl, { max: 1, onnotice: () => {}, prepare: false });
    try {
      const loading = loadServed(session, text, source, { serviceSchema: SERVICE_SCHEMA, earlier });
      return await (earlier === undefined ? loading : withTimeout(loading, RELOAD_READ_MS));
    } finally {
      await session.end({ timeout: 1 });
    }
  };
  const served = await read();
  // What the file serves by default that it may not mean to (a column named as a secret, no columns list): a warning line each.
  for (const line of served.warnings) urls.warn(line);
  if (served.registry.size === 0 && served.unavailable.size > 0) throw new CollectionsFileError([...served.unavailable.values()].flat());
  for (const [name, problems] of served.unavailable) urls.warn(unavailableLine(name, problems));
  urls.log(`Serving ${[...served.registry.keys()].join(', ')} from ${source}`);
  return { served, source, read };
}

/**
 * Every entry's start (server.ts, server.deno.ts, server.bun.ts): the configuration, read once from the
 * environment, its logger (JSON lines, or readable ones when a person watches the terminal), and the
 * service; a failure is the one line an operator reads, and exit 1. `options` say what differs by runtime:
 * the peer address as the runtime reports it, and whether the entry is draining.
 */
export async function startEntry(
  options: Omit<StartOptions, 'logger'> = {},
): Promise<{ config: Config; log: (line: string) => void; service: Service }> {
  const config = readConfig(process.env);
  const logger = createLogger({ level: config.logLevel, pretty: process.stdout.isTTY });
  const log = (line: string) => logger.info(line);
  const service = await startService(config, { ...options, logger }).catch((error: unknown) => {
    // A bad collections file's message is its problems, one a line (lib/collections/problems.ts).
    for (const line of describeFailure(error, config.port).split('\n')) console.error(`Could not start: ${line}`);
    return process.exit(1);
  });
  return { config, log, service };
}

export interface SignalOptions {
  /** SHUTDOWN_TIMEOUT_MS: past this the process exits 1 whatever is still running. */
  readonly timeoutMs: number;
  readonly log: (line: string) => void;
  /** Stops accepting; resolves once the requests in flight are answered. */
  readonly stopServing: () => Promise<void>;
  readonly exit: (code: number) => void;
}

/**
 * The Deno and Bun entries' signals: on SIGTERM or SIGINT, stop accepting, let the requests in flight finish, close
 * the pools (and the embedded PostgreSQL) and exit 0; past the deadline, or on another signal, exit 1. Node's entry
 * does more (lib/http/shutdown.ts: keep-alive connections told to close). SIGHUP reads the collections file and the
 * catalog again.
 */
export function stopOnSignals(service: Service, options: SignalOptions): void {
  let stopping = false;
  const force = (reason: string) => {
    options.log(`${reason}: exiting`);
    service.abandon();
    options.exit(1);
  };
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return force(`${signal} again`);
    stopping = true;
    options.log(`${signal}: finishing the requests in flight, for at most ${options.timeoutMs} ms`);
    const deadline = setTimeout(() => force(`Shutdown deadline of ${options.timeoutMs} ms passed`), options.timeoutMs);
    options
      .stopServing()
      .then(() => service.release())
      .then(
        () => {
          clearTimeout(deadline);
          options.exit(0);
        },
        (error: unknown) => force(`Stopping failed (${(error as Error).message})`),
      );
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, stop);
  process.on('SIGHUP', () => service.reload('SIGHUP'));
}
