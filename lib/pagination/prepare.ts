// A collection request's first stage (docs/reference/api.md, "Choosing the variant"): its collection, parameters, variant,
// plan and price, read once from the request before the rate limiter, or the 400 or 404 it is answered with.
import { ApiError } from '../http/errors.ts';
import type { Principal } from '../http/principal.ts';
import { EVERY_ROW, type RowScope, rowScope } from './access.ts';
import { cursorVariant } from './cursor.ts';
import { byFilterOrder, isFilterName, parseFilters } from './filters.ts';
import { Lru } from './lru.ts';
import { offsetVariant } from './offset.ts';
import { pageVariant } from './page.ts';
import { parseQueryString, type QueryParams } from './params.ts';
import { type Price, queryPrice, REFUSED } from './price.ts';
import type { Collection, Registry, VariantName } from './registry.ts';
import { parseSort, withTieBreaker } from './sort.ts';
import { timeVariant } from './time.ts';
import { checkParamsTaken, takes } from './variant-params.ts';
import { type QueryRequest, type Reading, selectVariant, type Variant } from './variants.ts';

const variants: Record<VariantName, Variant> = {
  offset: offsetVariant,
  page: pageVariant,
  cursor: cursorVariant,
  time: timeVariant,
};

/** A collection query read and checked as far as it can be without the database. */
export interface ReadQuery {
  readonly variant: Variant;
  readonly request: QueryRequest;
  /** The variant's plan of the chunk, and what it makes PostgreSQL read. */
  readonly plan: Reading;
}

/**
 * Picks the variant, checks what every variant shares (the parameters it takes, the filters, the sort), then
 * what the variant reads itself. A 400 (ApiError) on anything wrong.
 */
export function readQuery(collection: Collection, params: QueryParams, cursorSecret: string): ReadQuery {
  const { variant: name, cursor } = selectVariant(collection, params, cursorSecret);
  const variant = variants[name];
  checkParamsTaken(name, params.keys(), (param) => isFilterName(collection, param));
  const filters = parseFilters(collection, params);
  const sort = takes(name, 'sort') ? parseSort(collection, params) : withTieBreaker(collection.defaultSort, collection.key);
  const request = { collection, params, filters, sort, cursor };
  return { variant, request, plan: variant.read(request) };
}

/** A collection request ready to be admitted: the query it serves and its price (the count's from the estimate once known). */
export interface PreparedRead {
  readonly kind: 'read';
  readonly collection: Collection;
  /** The raw query string it was read from. */
  readonly query: string;
  /** The client's rows: every row until the request is bound to its client (Preparer.bind). */
  readonly rows: RowScope;
  /** The reading; its plan takes the planner's estimate once it is asked for (withEstimate). */
  read: ReadQuery;
  /** The price without the count's units, which the estimate gives (docs/reference/costs.md, "Counts"). */
  readonly price: Price;
}

/** A collection request answered with an error whatever the limiter says: a 400, or a 404 for no such collection. */
export interface PreparedRefusal {
  readonly kind: 'refused';
  readonly error: ApiError;
  /** 1 unit (docs/reference/costs.md, "Malformed requests cost 1"). */
  readonly price: Price;
}

export type Prepared = PreparedRead | PreparedRefusal;

/** The request for collection `name` with query string `rawQuery`, read once: what it serves and costs, or its 400 or 404. */
export function prepare(registry: Registry, name: string, rawQuery: string, cursorSecret: string): Prepared {
  const collection = registry.get(name);
  if (collection === undefined) return refused(new ApiError('not_found', `No collection named ${name}`));
  try {
    const read = readQuery(collection, parseQueryString(rawQuery), cursorSecret);
    return { kind: 'read', collection, query: rawQuery, rows: EVERY_ROW, read, price: queryPrice(collection, read.plan) };
  } catch (error) {
    if (error instanceof ApiError) return refused(error);
    throw error;
  }
}

/**
 * How many readings of query strings an app keeps. Reading a query is pure (the same collection, query string
 * and cursor secret give the same reading, a cursor's signature checked included), and a client that sends the
 * same request again, as one refused over and over does, is read once: a refusal costs its decision, not its
 * parse (docs/explanation/requests.md, "Read once, priced once").
 */
const READINGS_KEPT = 512;

/** A reading kept: the query as read and its price, or the 400 it answers. */
type Kept = { readonly read: ReadQuery; readonly price: Price } | ApiError;

/** `prepare` for one app's registry and cursor secret, keeping the readings of the query strings it read lately. */
export class Preparer {
  private readonly registry: Registry;
  private readonly cursorSecret: string;
  private readonly kept = new Lru<string, Kept>(READINGS_KEPT);

  constructor(registry: Registry, cursorSecret: string) {
    this.registry = registry;
    this.cursorSecret = cursorSecret;
  }

  prepare(name: string, rawQuery: string): Prepared {
    const collection = this.registry.get(name);
    if (collection === undefined) return refused(new ApiError('not_found', `No collection named ${name}`));
    const key = `${name}?${rawQuery}`;
    let kept = this.kept.get(key);
    if (kept === undefined) {
      const prepared = prepare(this.registry, name, rawQuery, this.cursorSecret);
      kept = prepared.kind === 'refused' ? prepared.error : { read: prepared.read, price: prepared.price };
      this.kept.set(key, kept);
    }
    // A value of its own each time: withEstimate gives this request's plan the estimate, not the kept one's.
    return kept instanceof ApiError
      ? refused(kept)
      : { kind: 'read', collection, query: rawQuery, rows: EVERY_ROW, read: kept.read, price: kept.price };
  }

  /**
   * The request read again for the rows its client may read, once the limiter said who that is: the same
   * reading for a collection without row rules; a 401 or 403 thrown when the client may not read the collection,
   * a 400 when its cursor was issued for other rows.
   */
  bind(prepared: PreparedRead, principal: Principal): PreparedRead {
    const rows = rowScope(prepared.collection, principal);
    if (rows.filters.length === 0) return prepared;
    const { collection, query } = prepared;
    // The client's rows are part of the reading (a cursor binds to them): a bound reading is kept per rows read.
    const key = `${collection.name}?${query}\n${rows.key}`;
    let kept = this.kept.get(key);
    if (kept === undefined) {
      // The query as already read, with the rules' filters beside the client's: only the variant's plan is
      // made again (a cursor's filters are checked against the client's rows there).
      try {
        const request = { ...prepared.read.request, filters: [...prepared.read.request.filters, ...rows.filters].sort(byFilterOrder) };
        const read = { variant: prepared.read.variant, request, plan: prepared.read.variant.read(request) };
        kept = { read, price: queryPrice(collection, read.plan, rows.scattered) };
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        kept = error;
      }
      this.kept.set(key, kept);
    }
    if (kept instanceof ApiError) throw kept;
    return { kind: 'read', collection, query, rows, read: kept.read, price: kept.price };
  }
}

function refused(error: ApiError): PreparedRefusal {
  return { kind: 'refused', error, price: REFUSED };
}

/**
 * Whether pricing `prepared` needs the planner's estimate of its filtered set: it carries a count (`exact`, or
 * the default `auto`, which counts only under the collection's threshold).
 */
export function needsEstimate(prepared: Prepared): prepared is PreparedRead {
  return prepared.kind === 'read' && (prepared.read.plan.count === 'exact' || prepared.read.plan.count === 'auto');
}

/** Gives the plan the planner's `estimate` of its filtered set: the count's units it adds to the price. */
export function withEstimate(prepared: PreparedRead, estimate: number): number {
  const { read } = prepared;
  prepared.read = { ...read, plan: { ...read.plan, estimate } };
  return queryPrice(prepared.collection, prepared.read.plan, prepared.rows.scattered).counting;
}

/** The units a collection query costs, read from its raw query string: what tests and the bench ask. */
export function requestCost(collection: Collection | undefined, rawQuery: string, cursorSecret: string, estimate?: number): number {
  if (!collection) return 1;
  const prepared = prepare(new Map([[collection.name, collection]]), collection.name, rawQuery, cursorSecret);
  if (prepared.kind === 'refused' || estimate === undefined) return prepared.price.units;
  return queryPrice(collection, { ...prepared.read.plan, estimate }).units;
}

/** A collection request answered with `error` whatever its query says (a method the path does not allow). */
export function refusedWith(error: ApiError): PreparedRefusal {
  return refused(error);
}
