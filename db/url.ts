// A PostgreSQL URL as libpq and postgres.js read it: one host, or a list of them (`postgres://h1:5432,h2:5432/db`),
// tried in turn for a connection, and `target_session_attrs` saying which of them will do (docs/how-to/ha-pair.md).
// WHATWG's URL parser refuses a host list (it reads `5432,h2` as a port), so the list is read here and the rest of
// the URL by that parser, on the URL with its first host only, as postgres.js itself does.

/** The values of `target_session_attrs` that libpq takes (PostgreSQL 14 on), and postgres.js with the project's patch. */
export const TARGET_SESSION_ATTRS = ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'] as const;

/** One host of a URL: its name or address (in lower case) and its port, undefined when the URL gives none. */
export interface UrlHost {
  readonly host: string;
  readonly port: number | undefined;
}

export interface PostgresUrl {
  /** `postgres:` or `postgresql:`, or whatever scheme the URL has (the caller checks). */
  readonly protocol: string;
  /** In the URL's order; one entry for a URL with a single host (empty for `postgres:///db`). */
  readonly hosts: readonly UrlHost[];
  /** The path's name, decoded; empty when the URL has none. */
  readonly database: string;
  /** `target_session_attrs`, as the URL gives it; undefined when it does not. */
  readonly targetSessionAttrs: string | undefined;
  /** The URL with its first host only: what WHATWG's URL parser reads. */
  readonly parsed: URL;
}

/**
 * Reads `url`; throws a TypeError saying what is wrong with it. A host list holds names and IPv4 addresses, each
 * with its port or not: postgres.js splits the list's entries at their first colon, so an IPv6 address (`[::1]`)
 * can only be a URL's one host.
 */
export function parsePostgresUrl(url: string): PostgresUrl {
  // The authority is what follows `//` up to the path, query or fragment; its hosts follow the last `@`.
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(url);
  const hostList = authority === null ? '' : authority[1]!.slice(authority[1]!.lastIndexOf('@') + 1);
  if (authority === null || !hostList.includes(',')) {
    const parsed = new URL(url);
    const single = parsed.hostname === '' ? [] : [{ host: parsed.hostname.toLowerCase(), port: portOf(parsed.port) }];
    return described(parsed, single);
  }
  const hosts = hostList.split(',').map((entry) => {
    const match = /^([^:[\]]+)(?::(\d{1,5}))?$/.exec(entry);
    if (match === null) {
      throw new TypeError(
        entry.startsWith('[')
          ? `the host list holds an IPv6 address (${entry}), which postgres.js cannot connect to in a list: name the host instead`
          : `the host list holds "${entry}", not a host or host:port`,
      );
    }
    const port = portOf(match[2] ?? '');
    if (port === 0) throw new TypeError(`the host list holds "${entry}", whose port is not from 1 to 65535`);
    return { host: match[1]!.toLowerCase(), port };
  });
  const start = authority.index + authority[0].length - hostList.length;
  const parsed = new URL(url.slice(0, start) + hostList.slice(0, hostList.indexOf(',')) + url.slice(start + hostList.length));
  return described(parsed, hosts);
}

function portOf(text: string): number | undefined {
  if (text === '') return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : 0;
}

function described(parsed: URL, hosts: readonly UrlHost[]): PostgresUrl {
  return {
    protocol: parsed.protocol,
    hosts,
    database: decodeURIComponent(parsed.pathname.replace(/^\//, '')),
    targetSessionAttrs: parsed.searchParams.get('target_session_attrs') ?? undefined,
    parsed,
  };
}

/** `host:port` of a URL's host (5432 when it gives no port): how logs and metrics name a server. */
export function hostName({ host, port }: UrlHost): string {
  return `${host}:${port ?? 5432}`;
}
