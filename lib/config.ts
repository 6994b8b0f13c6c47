// Service configuration: the environment parsed once into a typed, frozen object.

export interface Config {
  readonly port: number;
  /** Unset: the embedded PostgreSQL default is started. */
  readonly databaseUrl: string | undefined;
  /** Base of every absolute href; unset: taken from each request's own URL. */
  readonly publicUrl: string | undefined;
  /** Honour X-Forwarded-For / -Host / -Proto only when set. */
  readonly trustProxy: boolean;
  /** Unset: the operator API is off (404). */
  readonly adminToken: string | undefined;
  /** Unset: generated once and kept in the database, shared by all instances. */
  readonly cursorSecret: string | undefined;
  /** `statement_timeout` of data queries, in ms: a query that runs or waits longer is a 503. */
  readonly statementTimeoutMs: number;
  /** How long a request's data queries may wait for a pool connection, in ms, on top of their own time. */
  readonly poolTimeoutMs: number;
}

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

function parseBoolean(name: string, value: string | undefined): boolean {
  if (value === undefined) return false;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`Invalid ${name}: expected true or false, got "${value}"`);
}

function parseSecret(name: string, value: string | undefined, minLength: number): string | undefined {
  if (value === undefined) return undefined;
  if (value.length < minLength) {
    throw new ConfigError(`Invalid ${name}: must be at least ${minLength} characters long`);
  }
  return value;
}

function parseMilliseconds(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,7}$/.test(value) || Number(value) < 100 || Number(value) > 3_600_000) {
    throw new ConfigError(`Invalid ${name}: expected milliseconds from 100 to 3600000, got "${value}"`);
  }
  return Number(value);
}

/** Parses the environment; throws one ConfigError naming the first bad variable. */
export function parseConfig(env: Env): Config {
  const publicUrl = parseUrl('PUBLIC_URL', optional(env, 'PUBLIC_URL'), ['http:', 'https:']);
  return Object.freeze({
    port: parsePort(optional(env, 'PORT')),
    databaseUrl: parseUrl('DATABASE_URL', optional(env, 'DATABASE_URL'), ['postgres:', 'postgresql:']),
    publicUrl: publicUrl?.replace(/\/+$/, ''),
    trustProxy: parseBoolean('TRUST_PROXY', optional(env, 'TRUST_PROXY')),
    adminToken: parseSecret('ADMIN_TOKEN', optional(env, 'ADMIN_TOKEN'), 16),
    cursorSecret: parseSecret('CURSOR_SECRET', optional(env, 'CURSOR_SECRET'), 32),
    statementTimeoutMs: parseMilliseconds('STATEMENT_TIMEOUT_MS', optional(env, 'STATEMENT_TIMEOUT_MS'), 5000),
    poolTimeoutMs: parseMilliseconds('POOL_TIMEOUT_MS', optional(env, 'POOL_TIMEOUT_MS'), 2000),
  });
}
