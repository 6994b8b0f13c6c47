// The reload channel: every instance LISTENs on a session connection of its own to the database itself (the direct
// URL: a transaction pooler would hand the session to other clients between statements, and its LISTEN with it), and
// reads the file and the catalog again at each notification (docs/how-to/schema-changes.md). A connection lost is
// made again, and since notifications sent meanwhile are lost with it, the file and the catalog are read again then.
import postgres, { type Options, type Sql } from 'postgres';
import { withTimeout } from '../http/deadline.ts';

/** The channel: `NOTIFY paginated_collections_reload` (any payload) makes every instance read the file and the catalog again. */
export const RELOAD_CHANNEL = 'paginated_collections_reload';

/** How often the connection is asked whether it still answers, and how long it has to: a dead one may never say. */
const PROBE_MS = 30_000;
const PROBE_TIMEOUT_MS = 5_000;
/** The first pause before making a lost connection again, doubled up to the last. */
const RETRY_MS = [250, 500, 1000, 2000, 5000];

export interface ListenerOptions {
  /** The database itself (DATABASE_DIRECT_URL, or DATABASE_URL when that is no pooler). */
  readonly url: string;
  /** A notification came on the channel: `payload` as sent. */
  readonly notified: (payload: string) => void;
  /** The connection was lost and is listening again: what was sent meanwhile is unknown. */
  readonly resumed: () => void;
  readonly warn: (line: string) => void;
  readonly log: (line: string) => void;
}

export interface Listener {
  /** Stops listening and closes the connection. */
  close(): Promise<void>;
}

/**
 * Listens on RELOAD_CHANNEL; resolves once the first LISTEN is answered, or failed (then it is tried again, as
 * after a connection lost: start-up does not wait for it).
 */
export async function listenForReloads(options: ListenerOptions): Promise<Listener> {
  let client: Sql | undefined;
  let closed = false;
  let failures = 0;
  let retry: NodeJS.Timeout | undefined;

  const lost = (sql: Sql, error: unknown) => {
    if (closed || client !== sql) return;
    client = undefined;
    sql.end({ timeout: 0 }).catch(() => {});
    if (failures === 0) options.warn(`Reload notifications: the connection was lost (${describe(error)}); listening again`);
    const pause = RETRY_MS[Math.min(failures, RETRY_MS.length - 1)]!;
    failures++;
    retry = setTimeout(() => void connect(false), pause);
    retry.unref();
  };

  const connect = async (first: boolean) => {
    if (closed) return;
    // onnotify is postgres.js's own option for notifications, which its public `listen` uses and its types leave
    // out; `listen` itself makes a lost connection again only once, and says nothing when that fails.
    const options_ = {
      max: 1,
      max_lifetime: null,
      idle_timeout: null,
      prepare: false,
      fetch_types: false,
      connect_timeout: 5,
      onnotice: () => {},
      onnotify: (channel: string, payload: string) => {
        if (channel === RELOAD_CHANNEL) options.notified(payload);
      },
      onclose: () => lost(sql, new Error('connection closed')),
    } as unknown as Options<Record<string, never>>;
    const sql = postgres(options.url, options_);
    client = sql;
    try {
      await sql.unsafe(`listen ${RELOAD_CHANNEL}`);
      if (!first) {
        options.log(`Reload notifications: listening again on ${RELOAD_CHANNEL}`);
        options.resumed();
      }
      failures = 0;
    } catch (error) {
      lost(sql, error);
    }
  };

  const probe = setInterval(() => {
    const sql = client;
    if (sql === undefined) return;
    withTimeout(sql`select 1`, PROBE_TIMEOUT_MS).catch((error: unknown) => lost(sql, error));
  }, PROBE_MS);
  probe.unref();

  await connect(true);
  return {
    async close() {
      closed = true;
      clearInterval(probe);
      clearTimeout(retry);
      await client?.end({ timeout: 1 });
      client = undefined;
    },
  };
}

function describe(error: unknown): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  return [code, message].filter((part) => typeof part === 'string' && part !== '').join(': ') || String(error);
}
