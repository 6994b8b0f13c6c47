// Fresh databases for each test (migrated or empty, dropped at teardown), and the one-connection sessions tests open on them.
import { randomBytes } from 'node:crypto';
import postgres, { type Options, type Sql } from 'postgres';
import { type Database, openDatabase } from '../../db/client.ts';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { waitFor } from './wait.ts';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export function serverUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('Tests need DATABASE_URL; run them with `npm test`, which provides one');
  return url;
}

/** The URL of `database` on the test server. */
export function urlFor(database: string): string {
  const url = new URL(serverUrl());
  url.pathname = `/${database}`;
  return url.toString();
}

export interface TestDatabase extends Database {
  readonly url: string;
  readonly name: string;
}

/** What a scratch session may set: postgres.js's options, less the pool size (always one connection). */
type SessionOptions = Omit<Options<Record<string, never>>, 'max'>;

function openSession(url: string, options: SessionOptions): Sql {
  return postgres(url, { onnotice: () => {}, ...options, max: 1 });
}

/**
 * One plain connection to `url` (no pool of the service's, no drizzle), as an operator's psql would be; ended
 * when the test ends. A statement still waiting then (on a lock the test held) is cancelled after a second, not
 * waited for. Teardowns run last first: one the test adds after this (a drop over this session) runs before it ends.
 */
export function scratchSession(t: Teardown, url: string, options: SessionOptions = {}): Sql {
  const sql = openSession(url, options);
  t.teardown(() => sql.end({ timeout: 1 }));
  return sql;
}

/** Runs `fn` on one plain connection to `url`, ended as soon as `fn` is done (a test that needs it gone by then). */
export async function withSession<T>(url: string, fn: (sql: Sql) => Promise<T>, options: SessionOptions = {}): Promise<T> {
  const sql = openSession(url, options);
  try {
    return await fn(sql);
  } finally {
    await sql.end();
  }
}

/** A new, empty database on `server` (the test server's by default), no client of its own; dropped, with its sessions, when the test ends. */
export async function scratchDatabase(t: Teardown, server = serverUrl()): Promise<{ name: string; url: string }> {
  const name = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = scratchSession(t, server);
  await admin.unsafe(`create database ${name}`);
  t.teardown(() => admin.unsafe(`drop database if exists ${name} with (force)`));
  const url = new URL(server);
  url.pathname = `/${name}`;
  return { name, url: url.toString() };
}

/** A new, empty database on the test server, with a client; both gone when the test ends. */
export async function emptyDatabase(t: Teardown): Promise<{ name: string; url: string; sql: Sql }> {
  const { name, url } = await scratchDatabase(t);
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  t.teardown(() => sql.end());
  return { name, url, sql };
}

/** A new database with the service's schema and the demo's tables; it and its connections are gone when the test ends. */
export async function testDatabase(t: Teardown, options: { max?: number; statementTimeoutMs?: number } = {}): Promise<TestDatabase> {
  const { name, url } = await scratchDatabase(t);
  await runMigrations(url);
  await migrateDemo(url);
  const database = openDatabase(url, { max: options.max ?? 4, statementTimeoutMs: options.statementTimeoutMs });
  t.teardown(() => database.close());
  return { ...database, url, name };
}

/**
 * Resolves once `count` sessions of `database` wait for a lock (a request provably in flight behind it);
 * fails after `timeoutMs`.
 */
export async function lockWaiters(sql: Sql, database: string, count: number, timeoutMs = 10_000): Promise<void> {
  const waiting = async () => {
    const [row] = await sql`select count(*)::int as n from pg_stat_activity where datname = ${database} and wait_event_type = 'Lock'`;
    return row!.n as number;
  };
  await waitFor(`${count} sessions of ${database} waiting for a lock`, waiting, { until: (n) => n >= count, timeoutMs });
}
