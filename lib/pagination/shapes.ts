// The statement cache: each query is written with Drizzle once per shape (what varies with a request but not
// with its values: collection, kind, filter fields and operators, sort, position present or not, page size),
// with placeholders for every value, kept in a bounded cache, and run as a named statement on the server
// (lib/pagination/shared-reads.ts, runShape), which PostgreSQL parses once per connection and may plan once (a
// generic plan). Rows come back as arrays, read by position (lib/pagination/items.ts): no Drizzle work per
// request (docs/explanation/queries.md, "Prepared statements").
import { is, Placeholder, sql } from 'drizzle-orm';
import type { Sql } from 'postgres';
import type { Database } from '../../db/client.ts';
import { Lru } from './lru.ts';
import type { Collection } from './registry.ts';

/** A query of one shape: its SQL text, and the placeholder that fills each of its parameters ($1 is slots[0]). */
export interface Shape {
  readonly text: string;
  readonly slots: readonly string[];
  /**
   * Whether it runs as a named statement, parsed once per connection; past the cap on named statements it
   * runs as an unnamed one, parsed and planned on every call.
   */
  readonly named: boolean;
  /**
   * The text that also says how long the statement ran by the server's clock, in a row after its own
   * (timedText); undefined for a shape that is no plain SELECT (an EXPLAIN), which is not timed.
   */
  readonly timed: string | undefined;
}

/** Shapes built and kept per pool. */
export const SHAPE_CACHE_SIZE = 500;
/**
 * The most shapes ever named on one pool, so each of its connections holds at most this many prepared
 * statements, each holding backend memory for its plan, which bounds what a connection holds. postgres.js
 * keeps a connection's statements as long as the connection, and a client can ask for many shapes (every
 * page size, sort and filter combination), so a shape evicted from the cache keeps its name and a shape past
 * the cap runs unnamed: as fast as a query built anew, minus the building.
 */
export const NAMED_SHAPES = 500;

interface PoolShapes {
  readonly built: Lru<string, Shape>;
  readonly named: Set<string>;
}

// Statements are prepared per connection, so shapes are kept per pool; a pool that is gone takes its shapes.
const pools = new WeakMap<Sql, PoolShapes>();
// Collections are told apart by identity: two registries may name different collections alike.
const collectionIds = new WeakMap<Collection, number>();
let nextCollectionId = 0;

/** A key prefix unique to the collection object, for shape keys. */
export function collectionKey(collection: Collection): number {
  let id = collectionIds.get(collection);
  if (id === undefined) {
    id = nextCollectionId++;
    collectionIds.set(collection, id);
  }
  return id;
}

/**
 * A LIMIT written into the SQL text, for Drizzle's `.limit()`, which binds a number as a parameter: with
 * `LIMIT $n` PostgreSQL prices a generic plan for a tenth of the table, finds it dearer than a plan for the
 * value, and plans every call anew. Drizzle writes an SQL object as it is (its type says number only).
 */
export function literalLimit(rows: number): number {
  if (!Number.isSafeInteger(rows) || rows < 0) throw new Error(`Not a row count: ${rows}`);
  return sql.raw(String(rows)) as unknown as number;
}

/** What a Drizzle query builder turns into: SQL text with $n parameters. */
interface Built {
  toSQL(): { sql: string; params: unknown[] };
}

function slotsOf(params: readonly unknown[], text: string): string[] {
  return params.map((param) => {
    // A value written into a shape would make the shape depend on it: every value must be a placeholder.
    if (!is(param, Placeholder)) throw new Error(`A shape's parameter is not a placeholder: ${text}`);
    return param.name;
  });
}

/**
 * The shape under `key` on this database's pool, built by `build` (a Drizzle query with placeholders) the
 * first time, or again once the cache dropped it. `key` must say everything `build` depends on.
 */
export function shapeOf(database: Database, key: string, build: () => Built): Shape {
  let pool = pools.get(database.sql);
  if (pool === undefined) {
    pool = { built: new Lru(SHAPE_CACHE_SIZE), named: new Set() };
    pools.set(database.sql, pool);
  }
  const cached = pool.built.get(key);
  if (cached !== undefined) return cached;
  const query = build().toSQL();
  const named = pool.named.has(key) || pool.named.size < NAMED_SHAPES;
  if (named) pool.named.add(key);
  const shape: Shape = { text: query.sql, slots: slotsOf(query.params, query.sql), named, timed: timedText(query.sql) };
  pool.built.set(key, shape);
  return shape;
}

/**
 * A SELECT that also reads the server's clock once it has run: its rows, each with one more column (NULL),
 * then one row of NULLs whose last column is the milliseconds since the statement started
 * (statement_timestamp(), when the server took the statement). UNION ALL runs its branches in order, so the
 * clock is read after every row of the first; the second branch reads no table (`on false`: PostgreSQL does
 * not run it). No statement more, no round trip, no connection of its own: the time is the statement's own,
 * without the wait for a connection, the round trip or a turn of this process's event loop. Read by
 * lib/pagination/statement.ts, sendStatement.
 */
function timedText(text: string): string | undefined {
  if (!/^select /i.test(text)) return undefined;
  const clock = '(extract(epoch from clock_timestamp() - statement_timestamp()) * 1000)::float8';
  return `select q.*, null::float8 from (${text}) as q union all select q.*, ${clock} from (select 1) as one left join (${text}) as q on false`;
}
