// Where the service's routes are: one table that the router, the rate limiter's scope, the links and the
// OpenAPI description all read, so that a path is written once.

/** The API's version prefix: everything under it is rate-limited (docs/reference/limits.md, "What is limited"). */
const API_PREFIX = '/v1';

/** The paths of the service, as Hono routes (`:collection` a parameter). */
export const ROUTES = {
  root: '/',
  description: '/openapi.json',
  docs: '/docs',
  health: '/healthz',
  ready: '/readyz',
  metrics: '/metrics',
  admin: '/admin',
  index: API_PREFIX,
  /** Every collection, and the keys: one route, since a fixed path beside a parameter slows Hono's router. */
  collection: `${API_PREFIX}/:collection`,
} as const;

/** The name under /v1 that is not a collection: POST issues a key. */
export const KEYS = 'keys';

/** The path of a collection, or of the keys. */
export function collectionPath(name: string): string {
  return `${API_PREFIX}/${name}`;
}

/** What a request under /v1 is, from its path alone: the index, the keys, a name that may be a collection, or nothing. */
export type ApiTarget =
  | { readonly kind: 'index' }
  | { readonly kind: 'keys' }
  | { readonly kind: 'named'; readonly name: string }
  | { readonly kind: 'none' };

/** Reads a path under /v1 once, for the router's neighbours that need it before the router (the rate limiter). */
export function apiTarget(path: string): ApiTarget {
  if (path === API_PREFIX || path === `${API_PREFIX}/`) return { kind: 'index' };
  const name = path.startsWith(`${API_PREFIX}/`) ? path.slice(API_PREFIX.length + 1) : undefined;
  if (name === undefined || name.length === 0 || name.includes('/')) return { kind: 'none' };
  return name === KEYS ? { kind: 'keys' } : { kind: 'named', name };
}
