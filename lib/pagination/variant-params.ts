// The parameters of each pagination variant (docs/reference/api.md, "Choosing the variant"), in a module of their own:
// params.ts and links.ts read them, and variants.ts reads those modules' types, so the table cannot sit in
// variants.ts without an import cycle (npm run lint:layers).
import { invalidParameter } from '../http/errors.ts';
import type { VariantName } from './registry.ts';

/**
 * The parameters of each variant, the one table that selection, validation, links and the cost rule read.
 * `selects`: those whose presence picks the variant (a `cursor` picks the variant it was issued by, and a
 * `page-size` alone the collection's keyset variant); `takes`: every parameter but filters that the
 * variant reads; any other is a 400.
 */
export const variantParams = {
  offset: { selects: ['limit', 'offset'], takes: ['limit', 'offset', 'sort', 'count'] },
  page: { selects: ['page'], takes: ['page', 'page-size', 'sort', 'count'] },
  cursor: { selects: ['since_id'], takes: ['page-size', 'cursor', 'since_id', 'sort'] },
  time: { selects: ['before', 'after'], takes: ['page-size', 'cursor', 'before', 'after'] },
} as const satisfies Record<VariantName, { selects: readonly string[]; takes: readonly string[] }>;

/** Whether the variant reads the parameter (any filter aside). */
export function takes(variant: VariantName, name: string): boolean {
  return (variantParams[variant].takes as readonly string[]).includes(name);
}

/** Every parameter some variant takes. */
const allParams: ReadonlySet<string> = new Set(Object.values(variantParams).flatMap((entry) => entry.takes));

/** Parameters that links carry as the request sent them, with the filters; every other one positions a chunk. */
const carriedParams: ReadonlySet<string> = new Set(['sort', 'count']);

/**
 * Parameters that pick and position a variant: each link writes its own (of a fixed format, at most
 * 60 characters in all); every other parameter is carried into links as sent.
 */
export const POSITION_PARAMS: ReadonlySet<string> = new Set([...allParams].filter((name) => !carriedParams.has(name)));

/** A parameter the chosen variant does not take is a 400 naming it. */
export function checkParamsTaken(variant: VariantName, names: Iterable<string>, isFilter: (name: string) => boolean): void {
  for (const name of names) {
    if (takes(variant, name) || isFilter(name)) continue;
    if (allParams.has(name)) throw invalidParameter(name, `is not a parameter of ${variant} pagination`);
    throw invalidParameter(name, 'is not a known parameter');
  }
}
