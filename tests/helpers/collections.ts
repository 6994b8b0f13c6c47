// Collections for tests, made as the service makes them: a collections file's YAML resolved against a catalog, read
// from a database where the test made the relations (loadRegistry), or without one a snapshot such as the demo's.
import { readFileSync } from 'node:fs';
import type { Sql } from 'postgres';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';
import { DEMO_CATALOG } from '../../demo/collections.ts';
import type { CatalogModel } from '../../lib/catalog/model.ts';
import type { Registry } from '../../lib/pagination/registry.ts';
import { loadRegistry, resolveRegistry } from '../../lib/pagination/runtime.ts';
import { emptyDatabase } from './db.ts';

/** How problems name a test's file. */
const SOURCE = 'collections.yaml';
/** The schema a test makes its relations in: its files name them scratch.<name>. */
const SCRATCH = 'scratch';

/** The demo schema's catalog (demo/catalog.json), which demo/collections.ts resolves the demo's own file against. */
export function demoCatalog(): CatalogModel {
  return JSON.parse(readFileSync(DEMO_CATALOG, 'utf8')) as CatalogModel;
}

/** The registry of `yaml` resolved against `catalog` (default: the demo's); throws a CollectionsFileError as the service would. */
export function snapshotRegistry(yaml: string, catalog: CatalogModel = demoCatalog()): Registry {
  return resolveRegistry(yaml, SOURCE, catalog);
}

/** Makes schema scratch in the database of `sql` and runs `ddl` there: its unqualified names land in scratch. */
export async function makeScratch(sql: Sql, ddl: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx.unsafe(`create schema ${SCRATCH}`);
    await tx.unsafe(`set local search_path to ${SCRATCH}`);
    await tx.unsafe(ddl).simple();
  });
}

/** The registry of `yaml` resolved against the catalog of schema scratch in the database of `sql`, as the service loads a file. */
export async function scratchRegistry(sql: Sql, yaml: string): Promise<Registry> {
  return loadRegistry(sql, yaml, SOURCE, { schemas: [SCRATCH], serviceSchema: SERVICE_SCHEMA });
}

/**
 * The registry of `yaml` over the relations `ddl` makes, read from a database of their own (gone when the test
 * ends): for an app built before its own database holds them (testApp), where the test then makes them (makeScratch).
 */
export async function registryAhead(t: { teardown(fn: () => unknown): void }, ddl: string, yaml: string): Promise<Registry> {
  const { sql } = await emptyDatabase(t);
  await makeScratch(sql, ddl);
  return scratchRegistry(sql, yaml);
}
