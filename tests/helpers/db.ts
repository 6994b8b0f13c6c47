// Each test file gets its own fresh database on the test server, migrated, and dropped at teardown.
import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
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

/** A new, empty database on the test server, with a client; both gone when the test ends. */
export async function emptyDatabase(t: Teardown): Promise<{ name: string; url: string; sql: Sql }> {
  const name = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`).catch(async (error: unknown) => {
    await admin.end();
    throw error;
  });
  const url = urlFor(name);
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  t.teardown(async () => {
    await sql.end();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
  return { name, url, sql };
}

/** A new database with the service's schema and the demo's tables; it and its connections are gone when the test ends. */
export async function testDatabase(t: Teardown, options: { max?: number; statementTimeoutMs?: number } = {}): Promise<TestDatabase> {
  const name = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`).catch(async (error: unknown) => {
    await admin.end();
    throw error;
  });
  const url = urlFor(name);
  await runMigrations(url);
  await migrateDemo(url);
  const database = openDatabase(url, { max: options.max ?? 4, statementTimeoutMs: options.statementTimeoutMs });
  t.teardown(async () => {
    await database.close();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
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
