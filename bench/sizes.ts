// `npm run bench -- --sizes 50000,10000000`: the default chunk and its neighbours on tables of several sizes,
// each in its own database, so that what grows with the table shows beside what does not (docs/benchmarks.md,
// "Table sizes").
import type { ServerVariant } from './processes.ts';
import type { Comparison, Scenario } from './scenario-types.ts';

/** The depth of the deep rows, as a share of the table: 9,000,000 of 10,000,000. */
const DEPTH = 0.9;

/** The service as the other rows run it, given time for an exact count of the largest table (a 503 otherwise). */
export function sizeServer(service: ServerVariant): ServerVariant {
  return { ...service, name: 'service, long statements', env: { ...service.env, STATEMENT_TIMEOUT_MS: '120000' } };
}

const label = (products: number) => products.toLocaleString('en');

/** The path and query of an absolute href from a chunk's links. */
function pathOf(href: string): string {
  const url = new URL(href);
  return `${url.pathname}${url.search}`;
}

/**
 * The rows at one size, named by it. The rows that read the whole table or most of it (an exact count, a deep
 * offset) run one client: at ten of them the largest size's requests only queue behind each other.
 */
export function sizeScenarios(products: number, server: string): Scenario[] {
  const depth = Math.floor(products * DEPTH);
  const name = (row: string) => `${label(products)}: ${row}`;
  return [
    { name: name('default chunk'), server, path: '/v1/products' },
    {
      // A cursor the service issued at that depth: the next link of the since_id chunk there.
      name: name(`cursor at ~${label(depth)}`),
      server,
      setup: async ({ origin }) => {
        const response = await fetch(`${origin}/v1/products?since_id=${depth}&page-size=20`);
        const body = (await response.json()) as { _links?: { next?: { href: string } } };
        const href = body._links?.next?.href;
        if (!response.ok || !href) throw new Error(`since_id=${depth} answered ${response.status} without a next link`);
        return { path: pathOf(href) };
      },
    },
    { name: name('page 0, count=exact, 1 client'), server, path: '/v1/products?page=0&count=exact', connections: 1 },
    { name: name('page 0, count=estimated'), server, path: '/v1/products?page=0&count=estimated' },
    { name: name(`offset ${label(depth)}, count=none, 1 client`), server, path: `/v1/products?offset=${depth}&count=none`, connections: 1 },
  ];
}

/**
 * Each row of the largest size against the same row of the smallest; the default chunk is held to at most
 * twice the smallest size's time per request and PostgreSQL time per request.
 */
export function sizeComparisons(sizes: number[], server: string): Comparison[] {
  const smallest = Math.min(...sizes);
  const largest = Math.max(...sizes);
  if (smallest === largest) return [];
  const small = sizeScenarios(smallest, server);
  const large = sizeScenarios(largest, server);
  const ratio = `${label(largest)} / ${label(smallest)}`;
  return large.flatMap((row, i) => {
    const of = row.name;
    const to = small[i]!.name;
    const what = row.name.slice(row.name.indexOf(': ') + 2);
    if (i > 0) return [{ label: `${ratio}, ${what}`, of, to }];
    return [
      { label: `${ratio}, ${what}`, of, to, target: { measure: 'time/req' as const, atMost: 2 } },
      { label: `${ratio}, ${what}, PostgreSQL`, of, to, target: { measure: 'pg/req' as const, atMost: 2 } },
    ];
  });
}
