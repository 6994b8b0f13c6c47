// Builds the app on a fresh test database; requests go through app.request, no port is opened.
import type { Hono } from 'hono';
import { type SeedSizes, type SeedTable, seedTable } from '../../db/seed.ts';
import { buildApp } from '../../lib/http/app.ts';
import { type Config, parseConfig } from '../../lib/http/config.ts';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import { demoRegistry } from '../../lib/pagination/demo-collections.ts';
import { type TestDatabase, testDatabase } from './db.ts';

export interface TestApp {
  readonly app: Hono;
  readonly database: TestDatabase;
  readonly config: Config;
  /** GET (by default) a path on http://test.local; returns the response. */
  request(path: string, init?: RequestInit): Promise<Response>;
  /** GET a path and parse its JSON body. */
  json(path: string, init?: RequestInit): Promise<{ status: number; body: any; headers: Headers }>;
}

export async function testApp(
  t: { teardown(fn: () => unknown): void },
  options: { seed?: SeedSizes; env?: Record<string, string> } = {},
): Promise<TestApp> {
  const database = await testDatabase(t);
  for (const [table, count] of Object.entries(options.seed ?? {})) {
    if (count) await seedTable(database.sql, table as SeedTable, count);
  }
  const config = parseConfig(options.env ?? {});
  const cursorSecret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  const app = buildApp({ database, config, registry: demoRegistry(), cursorSecret, log: () => {} });
  const request = async (path: string, init?: RequestInit) => app.request(`http://test.local${path}`, init);
  return {
    app,
    database,
    config,
    request,
    async json(path, init) {
      const res = await request(path, init);
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
    },
  };
}

/** A path of the test app from an absolute href of its links. */
export function pathOf(href: string): string {
  return href.replace(/^http:\/\/test\.local/, '');
}
