// What a pagination variant is, and how a request picks one (docs/reference/api.md, "Choosing the variant").

import type { Database, StatementBudget } from '../../db/client.ts';
import { conflictingParameters, invalidCursor } from '../http/errors.ts';
import type { Chunk } from './chunk.ts';
import type { CountMode } from './count.ts';
import { type CursorPayload, decodeCursor } from './cursor-token.ts';
import type { Filter } from './filters.ts';
import type { linkBuilder } from './links.ts';
import type { QueryParams } from './params.ts';
import type { Collection, SortKey, VariantName } from './registry.ts';
import { variantParams } from './variant-params.ts';

/** A collection query as far as every variant reads it alike. */
export interface QueryRequest {
  readonly collection: Collection;
  readonly params: QueryParams;
  /** Parsed and normalised filters, in canonical order. */
  readonly filters: readonly Filter[];
  /** The sort keys ending with `id` (the collection's default when no `sort` was sent). */
  readonly sort: readonly SortKey[];
  /** The verified cursor, when one was sent. */
  readonly cursor: CursorPayload | undefined;
}

/** What serving a chunk needs beyond the query: the database, the secret its cursors are signed with, its URLs. */
export interface ChunkRequest extends QueryRequest {
  readonly cursorSecret: string;
  readonly database: Database;
  /** The admitted request's budget of PostgreSQL time, which times and bounds its statements; none without the rate limiter. */
  readonly budget?: StatementBudget | undefined;
  /** The absolute URL of the collection, without a query. */
  readonly collectionUrl: string;
  readonly href: ReturnType<typeof linkBuilder>;
}

/** What a chunk makes PostgreSQL read: what the cost rule charges (lib/pagination/price.ts). */
export interface Reading {
  readonly pageSize: number;
  /** How the chunk is counted ('none' for the keyset variants). */
  readonly count: CountMode;
  /** The planner's estimate of the filtered set, once the rate limiter asked for it to price the count. */
  readonly estimate?: number;
  /** The rows skipped before the chunk (0 for the keyset variants). */
  readonly offset: number;
  /** The first key of the chunk's order, which decides whether an index serves it. */
  readonly firstKey: string;
}

/**
 * A pagination variant in two steps. `read` checks every parameter the variant takes, without the database,
 * and returns its plan of the chunk: anything wrong is a 400 there, so the cost rule, which charges the
 * plan before the request is served, charges a 400 one unit and a chunk what it serves. `serve` fetches
 * the planned chunk.
 */
export interface Variant<Plan extends Reading = Reading> {
  readonly name: VariantName;
  read(request: QueryRequest): Plan;
  serve(request: ChunkRequest, plan: Plan): Promise<Chunk>;
}

/** A variant with its own plan type, as the table of variants holds it. */
export function defineVariant<Plan extends Reading>(variant: Variant<Plan>): Variant {
  return variant as unknown as Variant;
}

// Parameters that select a variant, by the family they belong to.
const families: ReadonlyArray<{ params: readonly string[]; variant: VariantName | 'cursor-token' }> = [
  ...Object.entries(variantParams).map(([variant, entry]) => ({ params: entry.selects, variant: variant as VariantName })),
  { params: ['cursor'], variant: 'cursor-token' },
];

export interface Selection {
  readonly variant: VariantName;
  readonly cursor: CursorPayload | undefined;
}

/** Picks the variant of a request; mixed families, or a variant the collection lacks, are a 400. */
export function selectVariant(collection: Collection, params: QueryParams, cursorSecret: string): Selection {
  const present: { variant: VariantName | 'cursor-token'; given: string[] }[] = [];
  for (const family of families) {
    if (!family.params.some((name) => params.has(name))) continue;
    present.push({ variant: family.variant, given: family.params.filter((name) => params.has(name)) });
  }
  if (present.length > 1) {
    throw conflictingParameters(
      present.flatMap((family) => family.given),
      'belong to different pagination variants and cannot be combined',
    );
  }
  if (params.has('before') && params.has('after')) {
    throw conflictingParameters(['before', 'after'], 'cannot be combined; before moves to older items, after to newer ones');
  }
  const family = present[0];
  let variant: VariantName;
  let cursor: CursorPayload | undefined;
  let reason: string[];
  if (family === undefined) {
    const keyset = collection.defaultVariant === 'time' ? 'time' : collection.variants.includes('cursor') ? 'cursor' : undefined;
    variant = params.has('page-size') ? (keyset ?? 'page') : collection.defaultVariant;
    reason = params.has('page-size') ? ['page-size'] : [];
  } else if (family.variant === 'cursor-token') {
    cursor = decodeCursor(cursorSecret, params.get('cursor')!, collection.name);
    variant = cursor.v;
    reason = ['cursor'];
  } else {
    variant = family.variant;
    reason = family.given;
  }
  if (!collection.variants.includes(variant)) {
    // Only a forged or foreign cursor can name a variant the collection lacks.
    if (cursor) throw invalidCursor(`it names ${variant} pagination, which ${collection.name} does not offer`);
    const names = reason.length > 0 ? reason : ['(none)'];
    throw conflictingParameters(
      names,
      `${collection.name} does not offer ${variant} pagination; it offers ${collection.variants.join(', ')}`,
    );
  }
  return { variant, cursor };
}
