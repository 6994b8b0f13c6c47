// What the service serves, one generation at a time: the collections file read against the catalog, read again on
// SIGHUP, on NOTIFY and when a statement meets a catalog that changed (docs/how-to/schema-changes.md). A reload is
// checked whole before it is swapped in; a request holds the generation it started with to its end.
import { createHash } from 'node:crypto';
import type { Logger } from '../http/logger.ts';
import type { Registry } from '../pagination/registry.ts';
import type { Served } from '../pagination/runtime.ts';

/** What is served from one reading of the file and the catalog. */
export interface Generation {
  /** 1 at start-up, one more at each reload that changed what is served. */
  readonly number: number;
  /** A digest of the file's text and of what each collection was resolved to (Served.hash). */
  readonly hash: string;
  readonly registry: Registry;
  /** The collections of the file that the catalog does not serve as it says, each with its problems: answered 503. */
  readonly unavailable: ReadonlyMap<string, readonly string[]>;
}

/** How reloads ended: changed what is served, found it the same, or failed (the last good generation kept). */
export type ReloadResult = 'changed' | 'unchanged' | 'failed';

export interface ServedCollections {
  /** The generation served now: a request takes it once, at its start. */
  current(): Generation;
  /** A statement of collection `name` failed as statements do when the catalog changed under them: read it again. */
  changed(name: string, error: unknown): void;
  /**
   * A request asked for collection `name`, unavailable: the catalog is read again, at most once every
   * RECHECK_MS, so that a collection comes back without a NOTIFY or SIGHUP once the catalog matches again.
   */
  asked(name: string): void;
  /** Reloads so far, by how they ended. */
  readonly reloads: Readonly<Record<ReloadResult, number>>;
}

/** A registry served as it is for the app's whole life (tests, the bench): one generation, never read again. */
export function fixedCollections(registry: Registry): ServedCollections {
  const hash = createHash('sha256')
    .update(JSON.stringify([...registry.keys()]))
    .digest('hex')
    .slice(0, 12);
  const generation: Generation = { number: 1, hash, registry, unavailable: new Map() };
  return { current: () => generation, changed: () => {}, asked: () => {}, reloads: { changed: 0, unchanged: 0, failed: 0 } };
}

/**
 * The SQLSTATEs of a statement that met a catalog other than the one its collection was resolved against: a
 * relation, schema, column, type or function gone (42P01, 3F000, 42703, 42704, 42883: an operator of a column's old
 * type), a column of another type (42804, 42846), a relation of another kind (42809), a privilege revoked (42501),
 * a materialized view emptied by REFRESH … WITH NO DATA (55000).
 */
const CATALOG_CHANGED = new Set(['42P01', '3F000', '42703', '42704', '42883', '42804', '42846', '42809', '42501', '55000']);

/** Whether `error` (or an error it wraps) is a statement's that met a changed catalog (CATALOG_CHANGED). */
export function catalogChanged(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && CATALOG_CHANGED.has(code)) return true;
  }
  return false;
}

export interface LiveOptions {
  /** Reads the file and the catalog again into what they serve (loadServed), given what is served now. */
  readonly read: (earlier: Served) => Promise<Served>;
  readonly logger: Logger;
  /** How the file is named in log lines. */
  readonly source: string;
  /** Reloads asked for within this many ms of the first are one (default 200). */
  readonly debounceMs?: number;
}

const DEFAULT_DEBOUNCE_MS = 200;
/** How often requests for an unavailable collection have the catalog read again: its 503's Retry-After. */
export const RECHECK_MS = 5000;

/**
 * The collections of a file served live: `reload` reads the file and the catalog again, at most one reading at a
 * time, the requests of a burst (a migration's DDL, a NOTIFY per statement) joined into one reading made
 * `debounceMs` after the first. A reading that fails (a file that does not parse or is wrong in itself, a database
 * that does not answer) keeps the generation served and logs why; one that finds what is served unchanged keeps it too.
 */
export class LiveCollections implements ServedCollections {
  readonly reloads: Record<ReloadResult, number> = { changed: 0, unchanged: 0, failed: 0 };
  private generation: Generation;
  private served: Served;
  private readonly options: LiveOptions;
  private readonly debounceMs: number;
  /** Why reloads were asked for since the last reading started. */
  private reasons = new Set<string>();
  /** Whether one of them was more than a recheck (`asked`), which logs at debug when it finds nothing changed. */
  private loud = false;
  /** When the last recheck was asked for (performance.now()). */
  private recheckedAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private closed = false;

  constructor(first: Served, options: LiveOptions) {
    this.served = first;
    this.generation = { number: 1, hash: first.hash, registry: first.registry, unavailable: first.unavailable };
    this.options = options;
    this.debounceMs = options.debounceMs ?? DEFAULT_DEBOUNCE_MS;
  }

  current(): Generation {
    return this.generation;
  }

  /** Reads the file and the catalog again, soon: `reason` says why, in the log line of the reading. */
  reload(reason: string, quiet = false): void {
    if (this.closed) return;
    this.reasons.add(reason);
    if (!quiet) this.loud = true;
    // A reading under way: another follows it, for what may have changed after it read the catalog.
    if (this.timer === undefined && this.reading === undefined) this.schedule();
  }

  changed(name: string, error: unknown): void {
    const { code, message } = error as { code?: unknown; message?: unknown };
    this.reload(`a statement of ${name} failed: ${String(code)} ${String(message)}`);
  }

  asked(name: string): void {
    const now = performance.now();
    if (now - this.recheckedAt < RECHECK_MS) return;
    this.recheckedAt = now;
    this.reload(`a request for ${name}, unavailable`, true);
  }

  /** No reading from now on (the process is stopping). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const why = [...this.reasons].join('; ');
      const loud = this.loud;
      this.reasons = new Set();
      this.loud = false;
      const start = performance.now();
      const took = () => `${Math.round(performance.now() - start)} ms`;
      this.reading = this.options
        .read(this.served)
        .then(
          (served) => this.swap(served, `${why}; read in ${took()}`, loud),
          (error: unknown) => this.keep(error, `${why}; after ${took()}`),
        )
        .finally(() => {
          this.reading = undefined;
          if (this.reasons.size > 0 && !this.closed) this.schedule();
        });
    }, this.debounceMs);
    this.timer.unref();
  }

  private swap(served: Served, why: string, loud: boolean): void {
    const { logger, source } = this.options;
    const earlier = this.generation;
    if (served.hash === earlier.hash) {
      this.reloads.unchanged++;
      const line = `Collections read again (${why}): unchanged, generation ${earlier.number} (${earlier.hash})`;
      if (loud) logger.info(line);
      else logger.debug(line);
      return;
    }
    this.reloads.changed++;
    const earlierWarnings = new Set(this.served.warnings);
    this.served = served;
    this.generation = { number: earlier.number + 1, hash: served.hash, registry: served.registry, unavailable: served.unavailable };
    for (const [name, problems] of served.unavailable) {
      if (sameProblems(earlier.unavailable.get(name), problems)) continue;
      logger.warn(unavailableLine(name, problems));
    }
    for (const name of earlier.unavailable.keys()) if (served.registry.has(name)) logger.info(`Collection ${name} is served again`);
    for (const line of served.warnings) if (!earlierWarnings.has(line)) logger.warn(line);
    logger.info(`${servingLine(this.generation, source)} (read again: ${why})`);
  }

  private keep(error: unknown, why: string): void {
    this.reloads.failed++;
    const { number, hash } = this.generation;
    const message = error instanceof Error ? error.message : String(error);
    this.options.logger.error(
      `Collections not read again (${why}): ${message.split('\n').join('; ')}; still serving generation ${number} (${hash})`,
    );
  }
}

function sameProblems(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((line, at) => line === b[at]);
}

/** The one line that says a collection is unavailable and why: its problems, as `check` prints them. */
export function unavailableLine(name: string, problems: readonly string[]): string {
  return `Collection ${name} is unavailable, answered 503 collection_unavailable: ${problems.join('; ')}`;
}

/** `Serving generation 2 (5f0c…) of collections.yaml: products, orders; unavailable: users`. */
function servingLine(generation: Generation, source: string): string {
  const served = [...generation.registry.keys()].join(', ') || 'nothing';
  const unavailable = generation.unavailable.size === 0 ? '' : `; unavailable: ${[...generation.unavailable.keys()].join(', ')}`;
  return `Serving generation ${generation.number} (${generation.hash}) of ${source}: ${served}${unavailable}`;
}
