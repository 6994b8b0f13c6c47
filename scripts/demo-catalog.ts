// `npm run demo:catalog`: writes demo/catalog.json, the catalog of schema demo as demo's migrations make it, in a
// scratch database on DATABASE_URL's server (made and dropped here). tests/db/demo-catalog.test.ts fails when stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { SERVICE_SCHEMA } from '../db/service-schema.ts';
import { catalogSnapshot, DEMO_CATALOG } from '../demo/collections.ts';
import { migrateDemo } from '../demo/migrate.ts';
import { DEMO_SCHEMA } from '../demo/schema.ts';
import { readCatalog } from '../lib/catalog/read.ts';

/** The demo schema's catalog snapshot, as the file holds it, read from a database the demo's migrations ran on. */
export async function demoCatalogText(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return `${JSON.stringify(catalogSnapshot(await readCatalog(sql, { schemas: [DEMO_SCHEMA], serviceSchema: SERVICE_SCHEMA })), null, 2)}\n`;
  } finally {
    await sql.end();
  }
}

/** A scratch database on `serverUrl`'s server with the demo's tables, for `use`; dropped after. */
export async function withDemoDatabase<T>(serverUrl: string, use: (url: string) => Promise<T>): Promise<T> {
  const name = `demo_catalog_${process.pid}_${Date.now()}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`).catch(async (error: unknown) => {
    await admin.end();
    throw error;
  });
  try {
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    await migrateDemo(url.href);
    return await use(url.href);
  } finally {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    console.error('DATABASE_URL names no server: demo:catalog makes a scratch database on it');
    process.exit(1);
  }
  writeFileSync(DEMO_CATALOG, await withDemoDatabase(serverUrl, demoCatalogText));
  console.log(`Wrote ${DEMO_CATALOG}`);
}
