// postgres.js's insides, in one module: the private fields of its Query and of its results that the service reads or
// hooks, and what the project's patch adds (patches/README.md). They are written against postgres.js 3.4.9 with
// patches/postgres+3.4.9.patch, checked when this module loads: a release that moved them must stop the service
// here, not leave a budget that never cancels (tests/db/driver.test.ts holds each field to what is read of it).
import { readFileSync } from 'node:fs';
import type { Sql } from 'postgres';

/** The postgres.js release the fields below were read in; its patch is patches/postgres+<version>.patch. */
export const DRIVER_VERSION = '3.4.9';

/** What postgres.js 3.4.9's Query holds (src/query.js, src/connection.js), of what the service uses. */
interface QueryInternals {
  /**
   * The cancel key (BackendKeyData) of the connection the query was handed to, whose `pid` is that
   * connection's backend process; null while the query waits in the pool for a connection.
   */
  state: { readonly pid: number } | null;
  /**
   * The pool's cancel for the query, until Query.cancel() takes it: a cancel request on a connection of its
   * own when the statement runs, a mark that drops it when it waits; null once taken.
   */
  canceller: ((query: QueryInternals) => Promise<void>) | null;
  /**
   * The patch's hook, null until filled: called by the connection where it sets the query's `active` to true, when
   * the statement becomes the one it runs (at once on an idle connection, once those pipelined before it answered
   * otherwise; patches/README.md).
   */
  onactive: (() => void) | null;
}

/** What the patch's `sql.poolStats()` tells of a pool (patches/README.md, "the pool's state"). */
export interface PoolStats {
  /** Connections open (or opening). */
  readonly open: number;
  /** Connections with a statement running (or opening for one). */
  readonly inUse: number;
  /** Statements not running yet: queued for a connection, or pipelined behind another on one. */
  readonly waiting: number;
  /**
   * Connections open, by the `host:port` of the URL's host they are open to: the host that answers, which a host
   * list (docs/how-to/ha-pair.md) changes with a failover. A connection still connecting counts nowhere.
   */
  readonly servers: Readonly<Record<string, number>>;
}

function internals(query: object): QueryInternals {
  return query as QueryInternals;
}

/** The backend process of the connection a query was handed to; undefined while it waits for one. */
export function backendPid(query: object): number | undefined {
  return internals(query).state?.pid;
}

/**
 * Whether the query still waits in its pool for a connection (none connected yet, or all busy): not a byte of it
 * was sent, and a client that ends now rejects it.
 */
export function awaitingConnection(query: object): boolean {
  return internals(query).state === null;
}

/**
 * Takes the query's cancel, as Query.cancel() does (a second take gets undefined), returning what calls it: the
 * promise Query.cancel() drops, so that the caller can handle its failure. A statement that runs is sent a
 * cancel request; one that waits for a connection is dropped, rejected with code 57014.
 */
export function takeCanceller(query: object): (() => Promise<void>) | undefined {
  const own = internals(query);
  const canceller = own.canceller;
  own.canceller = null;
  return canceller === null ? undefined : () => canceller(own);
}

/**
 * Calls `started` once, when the query's connection marks it active: the statement is then PostgreSQL's to run,
 * past the wait for a connection and for the statements pipelined before it. Through the patch's `onactive` slot,
 * which every Query has from its constructor: redefining `active` as an accessor on the query instead would turn
 * each budgeted query into a dictionary-mode object, slowing every field postgres.js reads of it.
 */
export function whenRunning(query: object, started: () => void): void {
  let told = false;
  internals(query).onactive = () => {
    if (told) return;
    told = true;
    started();
  };
}

/**
 * The backend process named by the cancel key that the connection which ran a statement got at connect: postgres.js
 * keeps it as its result's `state`. The backend's own pid, unless a pooler handed out a key of its own making.
 */
export function cancelKeyPid(result: object): number {
  return (result as { state: { readonly pid: number } }).state.pid;
}

/**
 * The patch's hook on opened connections, as an option of postgres(): `opened` is told the `host:port` of each
 * connection the client opens, once its server was found to be what target_session_attrs asks for, before any
 * statement runs on it (patches/README.md, "Host lists").
 */
export function onServer(opened: (server: string) => void): object {
  return { onserver: opened };
}

/** The patch's reader of a client's pool state; undefined for a client without it (not a postgres.js client). */
export function poolStatsOf(sql: Sql): (() => PoolStats) | undefined {
  return (sql as Sql & { poolStats?: () => PoolStats }).poolStats;
}

/**
 * Has each connection of `sql`'s pool write what it was handed in the current callback as soon as the callback has
 * handed it, rather than at the pool's next setImmediate (patches/README.md, "Writes when handed"). A statement sent
 * from a setImmediate callback (a batch of the rate limiter's, the reads the coalescer gathered in a turn) would
 * otherwise go out in the next turn of the event loop, behind everything that turn's poll reads: under load, other
 * requests. postgres.js hands a query to a connection one microtask after `then` is called on it (Query's
 * `handle`), so the writes are queued as a microtask after that: call this after the statements were sent, and
 * each connection writes them all at once. A query still waiting for a connection is written once it has one.
 */
export function writeWhenHanded(sql: Sql): void {
  const writePending = (sql as Sql & { writePending?: () => void }).writePending;
  if (writePending !== undefined) queueMicrotask(writePending);
}

/**
 * Throws unless the postgres.js that `entry` (the module `import 'postgres'` resolves to) belongs to is
 * DRIVER_VERSION with `patch` applied: every line the patch adds to the files beside `entry` (the copy this
 * runtime loads: src/ for Node, Deno and Bun) is in them.
 */
export function checkDriver(entry: URL, patch: URL): void {
  const root = packageRoot(entry);
  const { version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version?: unknown };
  if (version !== DRIVER_VERSION) {
    throw new Error(`Unpinned postgres.js: ${String(version)} is installed, db/driver.ts reads the private fields of ${DRIVER_VERSION}`);
  }
  const loaded = new URL('.', entry).href.slice(root.href.length);
  let checked = 0;
  for (const [file, added] of addedLines(readText(patch, 'its patch'))) {
    if (!file.startsWith(loaded)) continue;
    const installed = readText(new URL(file, root), file);
    const missing = added.find((line) => !installed.includes(line));
    if (missing !== undefined) throw new Error(`Unpatched postgres.js: ${file} lacks a line the patch adds: ${missing.trim()}`);
    checked++;
  }
  if (checked === 0) throw new Error(`Unpatched postgres.js: the patch changes no file of ${loaded}, the copy this runtime loads`);
}

function readText(file: URL, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`Unpatched postgres.js: ${what} cannot be read (${(error as Error).message})`);
  }
}

/** The folder of the package.json named `postgres` at or above `entry`. */
function packageRoot(entry: URL): URL {
  for (let folder = new URL('.', entry); ; folder = new URL('..', folder)) {
    try {
      const { name } = JSON.parse(readFileSync(new URL('package.json', folder), 'utf8')) as { name?: unknown };
      if (name === 'postgres') return folder;
    } catch {
      // no package.json here: one folder up
    }
    if (folder.pathname === '/') throw new Error(`Unpinned postgres.js: no package.json of postgres above ${entry.href}`);
  }
}

/** The non-blank lines a patch adds, by file (its path inside the package), from its `diff --git` sections. */
function addedLines(patch: string): Map<string, string[]> {
  const files = new Map<string, string[]>();
  let added: string[] | undefined;
  for (const line of patch.split('\n')) {
    const header = /^diff --git a\/node_modules\/postgres\/(\S+) /.exec(line);
    if (header !== null) {
      added = [];
      files.set(header[1]!, added);
    } else if (added !== undefined && line.startsWith('+') && !line.startsWith('+++') && line.trim() !== '+') {
      added.push(line.slice(1));
    }
  }
  return files;
}

checkDriver(new URL(import.meta.resolve('postgres')), new URL(`../patches/postgres+${DRIVER_VERSION}.patch`, import.meta.url));
