// Page-based pagination (docs/api.md, "Parameters", "The chunk"): zero-based `page` and `page-size`; offset = page-size × page.

import { invalidParameter } from '../http/errors.ts';
import { chunkResponse } from './chunk.ts';
import { parseCountMode } from './count.ts';
import type { Links } from './links.ts';
import { fetchPositional } from './offset.ts';
import { MAX_SAFE, parseInteger, parseSize, type QueryParams } from './params.ts';
import type { Collection } from './registry.ts';
import type { Variant } from './variants.ts';

/** `page` and `page-size` of a page chunk (offset = page-size × page ≤ 2^53−1): what it serves and is charged for. */
export function readPage(collection: Collection, params: QueryParams): { page: number; pageSize: number } {
  const pageSize = parseSize(params, 'page-size', collection.pageSize);
  const value = params.get('page');
  const page = value === undefined ? 0 : parseInteger('page', value, 0, MAX_SAFE);
  if (page > Math.floor(MAX_SAFE / pageSize))
    throw invalidParameter('page', `must be at most ${Math.floor(MAX_SAFE / pageSize)} with page-size ${pageSize}`);
  return { page, pageSize };
}

export const pageVariant: Variant = {
  name: 'page',
  async serve(request) {
    const { collection, params, href } = request;
    const { page, pageSize } = readPage(collection, params);
    const countMode = parseCountMode(params);
    const { items, more, size } = await fetchPositional(request, page * pageSize, pageSize, countMode);
    const totalPages = size === undefined ? undefined : Math.ceil(size / pageSize);
    const links: Links = {
      self: href({ page, 'page-size': pageSize }),
      next: more ? href({ page: page + 1, 'page-size': pageSize }) : undefined,
      prev: page > 0 ? href({ page: page - 1, 'page-size': pageSize }) : undefined,
      first: href({ page: 0, 'page-size': pageSize }),
      last: totalPages !== undefined ? href({ page: Math.max(0, totalPages - 1), 'page-size': pageSize }) : undefined,
    };
    const fields = totalPages === undefined ? { page, pageSize } : { page, pageSize, totalPages };
    return chunkResponse(collection.name, fields, items, links);
  },
};
