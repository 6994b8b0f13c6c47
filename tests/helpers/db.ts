// Fresh databases for each test (migrated or empty, dropped at teardown), and the one-connection sessions tests open on them.
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import postgres, { type Options, type ReservedSql, type Sql } from 'postgres';
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

/** The server's clock in milliseconds since 1970, read by a statement of its own on `sql`. */
export function serverClockMs(sql: Sql): Promise<number> {
  return sql<{ ms: number }[]>`select extract(epoch from clock_timestamp())::float8 * 1000 as ms`.then(([row]) => row!.ms);
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

/** Takes a lock (`take`, in a transaction on a session of its own) and holds it until `unlock()`. */
export async function holdLock(
  t: Teardown,
  url: string,
  take: (sql: ReservedSql) => Promise<unknown>,
): Promise<{ sql: ReservedSql; unlock(): Promise<void> }> {
  const sql = await scratchSession(t, url).reserve();
  await sql`begin`;
  await take(sql);
  return {
    sql,
    async unlock() {
      await sql`commit`;
      sql.release();
    },
  };
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

/** The prefix of the template databases testDatabase copies: scripts/test.ts drops them once the suite ends. */
export const TEMPLATE_PREFIX = 't_template_';

/** What a migrated database is made from: the migration code and files of the service and of the demo. */
const MIGRATION_SOURCES = [
  '../../db/migrate.ts',
  '../../db/service-schema.ts',
  '../../db/functions.ts',
  '../../db/migrations/',
  '../../db/functions/',
  '../../demo/migrate.ts',
  '../../demo/schema.ts',
  '../../demo/migrations/',
];

function migrationsDigest(): string {
  const hash = createHash('sha256');
  const add = (path: string) => {
    if (!path.endsWith('/')) return void hash.update(path).update(readFileSync(path));
    for (const entry of readdirSync(path, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      add(`${path}${entry.name}${entry.isDirectory() ? '/' : ''}`);
    }
  };
  for (const source of MIGRATION_SOURCES) add(fileURLToPath(new URL(source, import.meta.url)));
  return hash.digest('hex').slice(0, 16);
}

/**
 * A database with the service's schema and the demo's tables, migrated once per version of the migrations (and
 * server) and then copied by CREATE DATABASE … TEMPLATE, which takes a tenth of the time the migrations do: the
 * suite makes hundreds. Made under another name and renamed when whole, under an advisory lock, so that test
 * files starting at once make it once and never copy half of one. Nothing connects to it once made.
 */
async function migratedTemplate(server: string): Promise<string> {
  const name = `${TEMPLATE_PREFIX}${migrationsDigest()}`;
  return withSession(server, async (admin) => {
    const exists = async () => (await admin`select 1 from pg_database where datname = ${name}`).length > 0;
    if (await exists()) return name;
    await admin`select pg_advisory_lock(hashtext(${name}))`;
    try {
      if (await exists()) return name;
      const making = `${name}_making`;
      await admin.unsafe(`drop database if exists ${making} with (force)`);
      await admin.unsafe(`create database ${making}`);
      const url = new URL(server);
      url.pathname = `/${making}`;
      await runMigrations(url.toString());
      await migrateDemo(url.toString());
      await admin.unsafe(`alter database ${making} rename to ${name}`);
      return name;
    } finally {
      await admin`select pg_advisory_unlock(hashtext(${name}))`;
    }
  });
}

/** A new database with the service's schema and the demo's tables; it and its connections are gone when the test ends. */
export async function testDatabase(t: Teardown, options: { max?: number; statementTimeoutMs?: number } = {}): Promise<TestDatabase> {
  const server = serverUrl();
  const template = await migratedTemplate(server);
  const name = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = scratchSession(t, server);
  await admin.unsafe(`create database ${name} template ${template}`);
  t.teardown(() => admin.unsafe(`drop database if exists ${name} with (force)`));
  const url = urlFor(name);
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
