// What answers a database URL: PostgreSQL itself or a transaction pooler in front of it (PgBouncer), a
// primary or a standby (docs/how-to/pgbouncer.md and docs/how-to/replicas.md).
import postgres from 'postgres';
import { cancelKeyPid } from './driver.ts';
import { parsePostgresUrl } from './url.ts';

export interface ServerKind {
  /**
   * A connection pooler hands out the backends: PgBouncer gives each client a cancel key of its own
   * making, so the process id in it is not that of the backend that runs the client's statements;
   * PostgreSQL itself, or a plain TCP proxy, passes the backend's own.
   */
  readonly pooler: boolean;
  /** A standby in recovery: it reads, but refuses every write (migrations, the limiter, keys). */
  readonly standby: boolean;
}

/** Asks the server behind `url` on one connection of its own, with no setting at connect (PgBouncer refuses most). */
export async function probeServer(url: string): Promise<ServerKind> {
  const sql = postgres(url, { max: 1, connect_timeout: 10, fetch_types: false, onnotice: () => {} });
  try {
    const result = await sql`select pg_backend_pid() as pid, pg_is_in_recovery() as standby`;
    const [row] = result;
    // The cancel key the server sent at connect (BackendKeyData) names the backend, or the pooler's own process.
    return { pooler: cancelKeyPid(result) !== row!.pid, standby: row!.standby === true };
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/**
 * What the URL says of pooling, read as postgres.js reads its `prepare`: `prepare=false` (or `disable`)
 * marks a transaction pooler, any other value (`prepare=true`) a connection that is not one; undefined
 * when it says nothing, and the server is probed.
 */
export function pooledByUrl(url: string): boolean | undefined {
  const prepare = parsePostgresUrl(url).parsed.searchParams.get('prepare');
  if (prepare === null) return undefined;
  return prepare === 'false' || prepare === 'disable';
}
