// Page-based pagination (docs/reference/api.md, "Parameters", "The chunk"): zero-based `page` and `page-size`; offset = page-size × page.

import { invalidParameter } from '../http/errors.ts';
import type { Links } from './links.ts';
import { fetchPositional, positionalPlan, sizeFields } from './offset.ts';
import { MAX_SAFE, parseInteger, parseSize } from './params.ts';
import { defineVariant } from './variants.ts';

export const pageVariant = defineVariant({
  name: 'page',
  /** offset = page-size × page, at most 2^53−1. */
  read(request) {
    const { collection, params } = request;
    const pageSize = parseSize(params, 'page-size', collection.pageSize);
    const value = params.get('page');
    const page = value === undefined ? 0 : parseInteger('page', value, 0, MAX_SAFE);
    if (page > Math.floor(MAX_SAFE / pageSize)) {
      throw invalidParameter('page', `must be an integer from 0 to ${Math.floor(MAX_SAFE / pageSize)} with page-size ${pageSize}`);
    }
    return positionalPlan(request, page * pageSize, pageSize);
  },
  async serve(request, plan) {
    const { href } = request;
    const { pageSize } = plan;
    const page = plan.offset / pageSize;
    const { items, more, size } = await fetchPositional(request, plan);
    const totalPages = size === undefined ? undefined : Math.ceil(size.size / pageSize);
    const links: Links = {
      self: href({ page, 'page-size': pageSize }),
      next: more ? href({ page: page + 1, 'page-size': pageSize }) : undefined,
      prev: page > 0 ? href({ page: page - 1, 'page-size': pageSize }) : undefined,
      first: href({ page: 0, 'page-size': pageSize }),
      last: totalPages !== undefined ? href({ page: Math.max(0, totalPages - 1), 'page-size': pageSize }) : undefined,
    };
    const fields = { page, pageSize, ...sizeFields('totalPages', totalPages, size) };
    return { fields, items, links, counted: size?.counted };
  },
});
