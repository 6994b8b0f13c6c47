// What names a PostgreSQL database. Two names, for two needs:
// - databaseIdentity, from its URL: the rate limiter spreads its subjects over its databases by this
//   (lib/ratelimit/shards.ts), so it must not change with a password, an option, the order of
//   LIMITER_DATABASE_URL or that of a URL's host list (an HA pair is one database, whichever host is its
//   primary); but two spellings of one host are two names.
// - recordIdentity, what a limiter database records about itself once: every instance reads the same
//   record however it names the database, so the source of truth for keys and tiers and the order in which
//   changes lock the databases are chosen by it (lib/ratelimit/record-order.ts), never by a list's order.
import type { Sql } from 'postgres';
import { SERVICE_SCHEMA } from './service-schema.ts';
import { hostName, parsePostgresUrl } from './url.ts';

/**
 * `host:port/dbname` of a postgres:// URL: the host in lower case, port 5432 when absent, the path's name; for a
 * URL with a host list, its hosts so written, in sorted order and joined by commas (`a:5432,b:5432/dbname`).
 */
export function databaseIdentity(url: string): string {
  const { hosts, database, parsed } = parsePostgresUrl(url);
  // postgres: is no special scheme to URL, which so keeps the host as written.
  const names = hosts.length > 1 ? hosts.map(hostName).sort() : [`${parsed.hostname.toLowerCase()}:${parsed.port || '5432'}`];
  return `${names.join(',')}/${database}`;
}

/** The `settings` row that holds a database's record of itself. */
const RECORD_NAME = 'limiter_identity';

/**
 * The database's record of itself, written the first time it is asked for: when that was (RFC 3339 UTC,
 * microseconds, by the database's own clock) and a random UUID, `2025-01-02T03:04:05.123456Z 1b4e…`. The
 * text orders records by age, oldest first (fixed-width UTC times order as text), the UUID telling apart two
 * recorded in one microsecond. Kept in `settings`, which every migrated database has in the service's schema (db/schema.ts), so no migration
 * is needed and a database keeps its record through every release.
 */
export async function recordIdentity(session: Sql): Promise<string> {
  // Two statements, not one: an instance starting at the same moment may be inserting the row; `on conflict
  // do nothing` waits for its commit, and only a statement after that sees its row.
  await session`
    insert into ${session(SERVICE_SCHEMA)}.settings (name, value)
    values (${RECORD_NAME}, to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || ' ' || gen_random_uuid())
    on conflict (name) do nothing`;
  const [row] = await session`select value from ${session(SERVICE_SCHEMA)}.settings where name = ${RECORD_NAME}`;
  return row!.value as string;
}
