// What names a PostgreSQL database whatever spelling its URL has: the rate limiter spreads its subjects over
// its databases by this (lib/ratelimit/shards.ts), so it must not change with a password, an option or the
// order of LIMITER_DATABASE_URL.

/** `host:port/dbname` of a postgres:// URL: the host in lower case, port 5432 when absent, the path's name. */
export function databaseIdentity(url: string): string {
  const parsed = new URL(url);
  // postgres: is no special scheme to URL, which so keeps the host as written.
  return `${parsed.hostname.toLowerCase()}:${parsed.port || '5432'}/${decodeURIComponent(parsed.pathname.replace(/^\//, ''))}`;
}
