// Service configuration: the environment parsed once into a typed, frozen object.
import proxyaddr from 'proxy-addr';
import { SYNCHRONOUS_COMMIT, type SynchronousCommit } from '../../db/client.ts';
import { databaseIdentity } from '../../db/identity.ts';
import { parsePostgresUrl, TARGET_SESSION_ATTRS } from '../../db/url.ts';
import type { TrustProxy } from '../http/forwarding.ts';
import { LOG_LEVELS, type LogLevel } from '../http/logger.ts';
import { DEFAULT_HOLD_MS, HOLD_WINDOW_MS } from '../ratelimit/holds.ts';
import { publicKeyOf, type TokenSettings } from '../ratelimit/tokens.ts';

export interface Config {
  readonly port: number;
  /** Unset: the embedded PostgreSQL default is started. */
  readonly databaseUrl: string | undefined;
  /** The database itself when DATABASE_URL leads to a transaction pooler: migrations, seeding, the cursor secret. Unset: DATABASE_URL. */
  readonly databaseDirectUrl: string | undefined;
  /** A read replica for collection queries. Unset: they run on DATABASE_URL. */
  readonly databaseReadUrl: string | undefined;
  /**
   * The rate limiter's databases (LIMITER_DATABASE_URL), each subject on one of them; unset: the limiter's
   * tables, keys and tiers are on the data database (docs/how-to/limiter-databases.md).
   */
  readonly limiterDatabaseUrls: readonly string[] | undefined;
  /**
   * The `synchronous_commit` of the limiter's decisions (LIMITER_SYNCHRONOUS_COMMIT): `off` by default, so a
   * decision never waits for a WAL flush, and a crash or a failover can lose the last ones
   * (docs/explanation/rate-limit.md, "Asynchronous commit").
   */
  readonly limiterSynchronousCommit: SynchronousCommit;
  /** Base of every absolute href; unset: taken from each request's own URL. */
  readonly publicUrl: string | undefined;
  /** Which peers are our proxies, whose X-Forwarded-For / -Host / -Proto count; none when unset. */
  readonly trustProxy: TrustProxy;
  /** Unset: the operator API is off (404). */
  readonly adminToken: string | undefined;
  /** Unset: generated once and kept in the database, shared by all instances. */
  readonly cursorSecret: string | undefined;
  /** After SIGTERM/SIGINT, in-flight requests get this long before connections are cut. */
  readonly shutdownTimeoutMs: number;
  /** `statement_timeout` of data queries, in ms: a query that runs or waits longer is a 503. */
  readonly statementTimeoutMs: number;
  /** How long a request's data queries may wait for a pool connection, in ms, on top of their own time. */
  readonly poolTimeoutMs: number;
  /** Connections of the pool for data queries (the rate limiter has one of its own besides). */
  readonly databasePoolSize: number;
  /** pino's level: one line per request at `info`, errors at `error`; `silent` logs nothing. */
  readonly logLevel: LogLevel;
  /**
   * How long a request waits before its decision when its client was declined over its allowance within the
   * last second (LIMITER_HOLD_MS; docs/reference/limits.md, "Asking again too soon"); 0: never.
   */
  readonly limiterHoldMs: number;
  /** After a stop signal, how long /readyz fails while requests are still served, before the server stops accepting. */
  readonly shutdownDrainMs: number;
  /** The origins whose browser pages may read the API's answers: `*` (any), or a list of exact origins. */
  readonly corsOrigins: '*' | readonly string[];
  /**
   * What is served (COLLECTIONS): a collections file (YAML, or JSON when it ends in .json; docs/reference/collections-file.md), or
   * the demo, which the embedded default serves when COLLECTIONS is unset.
   */
  readonly collections: Collections;
  /** Bearer JWTs (JWT_*; docs/reference/configuration.md, "Tokens"); unset unless a key source is set. */
  readonly tokens: TokenSettings | undefined;
}

/** COLLECTIONS: the demo, or a collections file by its path (as given, relative to the working directory). */
type Collections = { readonly kind: 'demo' } | { readonly kind: 'file'; readonly path: string };

/** pino's levels, least to most verbose. */

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

function optional(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function parsePort(value: string | undefined): number {
  if (value === undefined) return 3000;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) {
    throw new ConfigError(`Invalid PORT: expected an integer from 0 to 65535, got "${value}"`);
  }
  return Number(value);
}

function parseUrl(name: string, value: string | undefined, protocols: string[]): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`Invalid ${name}: "${value}" is not a URL`);
  }
  if (!protocols.includes(url.protocol)) {
    throw new ConfigError(`Invalid ${name}: expected a ${protocols.join(' or ')} URL, got "${value}"`);
  }
  return value;
}

const TRUST_PROXY_FORMS =
  'a hop count (1: the one proxy in front of every instance) or a comma list of proxy addresses and CIDRs (10.0.0.0/8, ::1, loopback)';

/**
 * TRUST_PROXY in proxy-addr's terms: a hop count, or the proxies' addresses and CIDRs. "true" is
 * refused: trusting X-Forwarded-For from any peer lets a client that reaches an instance directly
 * pick its own address, and so a fresh allowance per request.
 */
function parseTrustProxy(value: string | undefined): TrustProxy {
  if (value === undefined || /^(false|no|off)$/i.test(value)) return { kind: 'none' };
  if (/^(true|yes|on)$/i.test(value)) {
    throw new ConfigError(
      `Invalid TRUST_PROXY: "${value}" would trust X-Forwarded-For from any client; name your proxies with ${TRUST_PROXY_FORMS}`,
    );
  }
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    if (hops > 16) throw new ConfigError(`Invalid TRUST_PROXY: expected at most 16 hops, got "${value}"`);
    return hops === 0 ? { kind: 'none' } : { kind: 'hops', hops };
  }
  const addresses = value.split(',').map((part) => part.trim());
  try {
    if (addresses.includes('')) throw new TypeError('an empty entry');
    proxyaddr.compile(addresses);
  } catch (error) {
    throw new ConfigError(`Invalid TRUST_PROXY: ${(error as Error).message} in "${value}"; expected ${TRUST_PROXY_FORMS}`);
  }
  return Object.freeze({ kind: 'addresses', addresses: Object.freeze(addresses) });
}

function parseSecret(name: string, value: string | undefined, minLength: number): string | undefined {
  if (value === undefined) return undefined;
  if (value.length < minLength) {
    throw new ConfigError(`Invalid ${name}: must be at least ${minLength} characters long`);
  }
  return value;
}

function parseMilliseconds(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,9}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`Invalid ${name}: expected a whole number of milliseconds from ${min} to ${max}, got "${value}"`);
  }
  return Number(value);
}

function parseCount(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,9}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`Invalid ${name}: expected a whole number from ${min} to ${max}, got "${value}"`);
  }
  return Number(value);
}

function parseLogLevel(value: string | undefined): LogLevel {
  if (value === undefined) return 'info';
  const level = LOG_LEVELS.find((name) => name === value.toLowerCase());
  if (level === undefined) throw new ConfigError(`Invalid LOG_LEVEL: expected one of ${LOG_LEVELS.join(', ')}, got "${value}"`);
  return level;
}

const POSTGRES = ['postgres:', 'postgresql:'];

/**
 * A postgres:// URL, with one host or a list of them and a `target_session_attrs` libpq knows
 * (docs/how-to/ha-pair.md). `writes`: the URL must reach a primary, whatever its hosts are doing: a host list
 * then needs `target_session_attrs=read-write` (or `primary`), without which a connection made again after a
 * failover could reach the standby, and a value that asks for a standby is refused.
 */
function parseDatabaseUrl(name: string, value: string | undefined, writes: boolean, env: Env): string | undefined {
  if (value === undefined) return undefined;
  let url: ReturnType<typeof parsePostgresUrl>;
  try {
    url = parsePostgresUrl(value);
  } catch (error) {
    const reason = (error as Error).message;
    throw new ConfigError(`Invalid ${name}: "${value}" is not a URL${reason.startsWith('the host list') ? `: ${reason}` : ''}`);
  }
  if (!POSTGRES.includes(url.protocol)) {
    throw new ConfigError(`Invalid ${name}: expected a ${POSTGRES.join(' or ')} URL, got "${value}"`);
  }
  // libpq's and postgres.js's default when the URL says nothing.
  const attrs = url.targetSessionAttrs ?? optional(env, 'PGTARGETSESSIONATTRS');
  if (attrs !== undefined && !(TARGET_SESSION_ATTRS as readonly string[]).includes(attrs)) {
    throw new ConfigError(`Invalid ${name}: target_session_attrs must be one of ${TARGET_SESSION_ATTRS.join(', ')}, got "${attrs}"`);
  }
  if (!writes) return value;
  const from = url.targetSessionAttrs === undefined ? 'PGTARGETSESSIONATTRS' : 'target_session_attrs';
  if (attrs === 'standby' || attrs === 'prefer-standby' || attrs === 'read-only') {
    throw new ConfigError(
      `Invalid ${name}: ${from}=${attrs} leads to a standby, which refuses writes; use read-write (or primary), and DATABASE_READ_URL for a standby`,
    );
  }
  if (url.hosts.length > 1 && attrs !== 'read-write' && attrs !== 'primary') {
    throw new ConfigError(
      `Invalid ${name}: it names ${url.hosts.length} hosts without target_session_attrs=read-write (or primary), so a connection could reach a standby, which refuses writes; add ?target_session_attrs=read-write`,
    );
  }
  return value;
}

function parseSynchronousCommit(value: string | undefined): SynchronousCommit {
  if (value === undefined) return 'off';
  const level = SYNCHRONOUS_COMMIT.find((name) => name === value);
  if (level === undefined) {
    throw new ConfigError(`Invalid LIMITER_SYNCHRONOUS_COMMIT: expected one of ${SYNCHRONOUS_COMMIT.join(', ')}, got "${value}"`);
  }
  return level;
}

/** More would each be a connection of every instance, and a copy of every key to write. */
const MAX_LIMITER_DATABASES = 16;

/**
 * LIMITER_DATABASE_URL: one URL, or a comma list, each naming a database no other entry names. A URL's own host
 * list holds commas too: a comma inside a URL's authority (after `//`, before its path or query), followed by no
 * scheme, separates that URL's hosts.
 */
function parseLimiterUrls(value: string | undefined, env: Env): readonly string[] | undefined {
  if (value === undefined) return undefined;
  const parts: string[] = [];
  for (const part of value.split(',')) {
    const last = parts.at(-1);
    const inAuthority = last !== undefined && /^\s*[a-z][a-z0-9+.-]*:\/\/[^/?#]*$/i.test(last);
    if (inAuthority && !/^\s*[a-z][a-z0-9+.-]*:\/\//i.test(part)) parts[parts.length - 1] = `${last},${part}`;
    else parts.push(part);
  }
  const urls = parts.map((part) => parseDatabaseUrl('LIMITER_DATABASE_URL', part.trim(), true, env)!);
  if (urls.length > MAX_LIMITER_DATABASES) {
    throw new ConfigError(`Invalid LIMITER_DATABASE_URL: expected at most ${MAX_LIMITER_DATABASES} URLs, got ${urls.length}`);
  }
  const seen = new Set<string>();
  for (const url of urls) {
    const identity = databaseIdentity(url);
    if (seen.has(identity)) throw new ConfigError(`Invalid LIMITER_DATABASE_URL: ${identity} is named twice`);
    seen.add(identity);
  }
  return Object.freeze(urls);
}
/**
 * CORS_ORIGINS: `*`, or a comma list of origins as browsers send them (`https://app.example.com`, with a
 * port when it is not the scheme's own): a scheme, a host, a port, and nothing else.
 */
function parseCorsOrigins(value: string | undefined): '*' | readonly string[] {
  if (value === undefined || value.trim() === '*') return '*';
  const origins = value.split(',').map((part) => part.trim());
  for (const origin of origins) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || !['http:', 'https:'].includes(parsed.protocol) || parsed.origin !== origin) {
      throw new ConfigError(
        `Invalid CORS_ORIGINS: "${origin}" is not an origin; expected * or a comma list such as https://app.example.com,http://localhost:5173`,
      );
    }
  }
  return Object.freeze(origins);
}

/**
 * COLLECTIONS: `demo`, or a file's path. Unset, the embedded default serves the demo; with DATABASE_URL, the team's
 * database, nothing is guessed: start-up stops before it touches the database, saying how to write a file.
 */
function parseCollections(value: string | undefined, databaseUrl: string | undefined): Collections {
  if (value === undefined) {
    if (databaseUrl === undefined) return Object.freeze({ kind: 'demo' });
    throw new ConfigError(
      'COLLECTIONS is not set: name the tables to serve in a file (npm run --silent collections -- init > collections.yaml, then COLLECTIONS=collections.yaml; docs/reference/collections-file.md), or set COLLECTIONS=demo to serve the demo in this database',
    );
  }
  if (value === 'demo') return Object.freeze({ kind: 'demo' });
  return Object.freeze({ kind: 'file', path: value });
}

/** Where the keys that verify tokens come from; the other JWT_* settings mean nothing without one of them. */
const JWT_SOURCES = ['JWT_SECRET', 'JWT_PUBLIC_KEY', 'JWT_JWKS_URL'];
const JWT_SETTINGS = ['JWT_ISSUER', 'JWT_AUDIENCE', 'JWT_TIER_CLAIM', 'JWT_DEFAULT_TIER'];
/** The tier names of /admin/tiers. */
const TIER_NAME = /^[a-z][a-z0-9_-]{0,39}$/;

/**
 * JWT_*: one source of keys, or none (no tokens). One only: with two, a token would choose by its `alg` which key
 * verifies it, and whoever holds the shared secret could sign what the identity provider's keys were meant to vouch for.
 */
function parseTokens(env: Env): TokenSettings | undefined {
  const named = JWT_SOURCES.filter((name) => optional(env, name) !== undefined);
  if (named.length > 1) {
    throw new ConfigError(`Invalid ${named[1]}: ${named[0]} is set too; set only one of ${JWT_SOURCES.join(', ')}`);
  }
  if (named.length === 0) {
    const stray = JWT_SETTINGS.find((name) => optional(env, name) !== undefined);
    if (stray !== undefined)
      throw new ConfigError(`Invalid ${stray}: it needs one of ${JWT_SOURCES.join(', ')}, the keys that verify tokens`);
    return undefined;
  }
  // RFC 7518 section 3.2: an HS256 key of at least 256 bits.
  const secret = parseSecret('JWT_SECRET', optional(env, 'JWT_SECRET'), 32);
  let publicKey = optional(env, 'JWT_PUBLIC_KEY');
  if (publicKey !== undefined) {
    try {
      publicKeyOf(publicKey);
    } catch (error) {
      throw new ConfigError(`Invalid JWT_PUBLIC_KEY: ${(error as Error).message}`);
    }
    publicKey = publicKey.replace(/\\n/g, '\n');
  }
  const jwksUrl = parseUrl('JWT_JWKS_URL', optional(env, 'JWT_JWKS_URL'), ['https:', 'http:']);
  const tierClaim = optional(env, 'JWT_TIER_CLAIM') ?? 'tier';
  if (!/^[\x21-\x7e]{1,200}$/.test(tierClaim)) {
    throw new ConfigError(
      `Invalid JWT_TIER_CLAIM: expected a claim name of 1 to 200 printable characters without spaces, got "${tierClaim}"`,
    );
  }
  const defaultTier = optional(env, 'JWT_DEFAULT_TIER') ?? 'free';
  if (!TIER_NAME.test(defaultTier)) {
    throw new ConfigError(
      `Invalid JWT_DEFAULT_TIER: expected a tier name (a-z, 0-9, _ and -, starting with a letter), got "${defaultTier}"`,
    );
  }
  const issuer = optional(env, 'JWT_ISSUER');
  const audience = optional(env, 'JWT_AUDIENCE');
  return Object.freeze({
    ...(secret === undefined ? {} : { secret }),
    ...(publicKey === undefined ? {} : { publicKey }),
    ...(jwksUrl === undefined ? {} : { jwksUrl }),
    ...(issuer === undefined ? {} : { issuer }),
    ...(audience === undefined ? {} : { audience }),
    tierClaim,
    defaultTier,
  });
}

/** Parses the environment; throws one ConfigError naming the first bad variable. */
export function parseConfig(env: Env): Config {
  const publicUrl = parseUrl('PUBLIC_URL', optional(env, 'PUBLIC_URL'), ['http:', 'https:']);
  if (optional(env, 'DATABASE_URL') === undefined) {
    // Both name other ways to one database; the embedded default is a server of its own.
    for (const name of ['DATABASE_DIRECT_URL', 'DATABASE_READ_URL']) {
      if (optional(env, name) !== undefined) throw new ConfigError(`Invalid ${name}: it needs DATABASE_URL, the database it leads to`);
    }
  }
  return Object.freeze({
    port: parsePort(optional(env, 'PORT')),
    databaseUrl: parseDatabaseUrl('DATABASE_URL', optional(env, 'DATABASE_URL'), true, env),
    databaseDirectUrl: parseDatabaseUrl('DATABASE_DIRECT_URL', optional(env, 'DATABASE_DIRECT_URL'), true, env),
    databaseReadUrl: parseDatabaseUrl('DATABASE_READ_URL', optional(env, 'DATABASE_READ_URL'), false, env),
    limiterDatabaseUrls: parseLimiterUrls(optional(env, 'LIMITER_DATABASE_URL'), env),
    limiterSynchronousCommit: parseSynchronousCommit(optional(env, 'LIMITER_SYNCHRONOUS_COMMIT')),
    publicUrl: publicUrl?.replace(/\/+$/, ''),
    trustProxy: parseTrustProxy(optional(env, 'TRUST_PROXY')),
    adminToken: parseSecret('ADMIN_TOKEN', optional(env, 'ADMIN_TOKEN'), 16),
    cursorSecret: parseSecret('CURSOR_SECRET', optional(env, 'CURSOR_SECRET'), 32),
    shutdownTimeoutMs: parseMilliseconds('SHUTDOWN_TIMEOUT_MS', optional(env, 'SHUTDOWN_TIMEOUT_MS'), 10_000, 0, 600_000),
    statementTimeoutMs: parseMilliseconds('STATEMENT_TIMEOUT_MS', optional(env, 'STATEMENT_TIMEOUT_MS'), 5000, 100, 3_600_000),
    poolTimeoutMs: parseMilliseconds('POOL_TIMEOUT_MS', optional(env, 'POOL_TIMEOUT_MS'), 2000, 100, 3_600_000),
    // Each connection is a PostgreSQL backend (max_connections is 100 by default, shared by every instance).
    databasePoolSize: parseCount('DATABASE_POOL_SIZE', optional(env, 'DATABASE_POOL_SIZE'), 10, 1, 100),
    logLevel: parseLogLevel(optional(env, 'LOG_LEVEL')),
    limiterHoldMs: parseMilliseconds('LIMITER_HOLD_MS', optional(env, 'LIMITER_HOLD_MS'), DEFAULT_HOLD_MS, 0, HOLD_WINDOW_MS),
    // 0: stop accepting at once, for a process no balancer polls; behind one, its time to mark an instance down.
    shutdownDrainMs: parseMilliseconds('SHUTDOWN_DRAIN_MS', optional(env, 'SHUTDOWN_DRAIN_MS'), 0, 0, 600_000),
    corsOrigins: parseCorsOrigins(optional(env, 'CORS_ORIGINS')),
    collections: parseCollections(optional(env, 'COLLECTIONS'), optional(env, 'DATABASE_URL')),
    tokens: parseTokens(env),
  });
}
