// The demo's collections: its file (demo/collections.yaml), served like any team's (lib/pagination/runtime.ts,
// loadRegistry, on the live catalog), and the same file resolved against demo/catalog.json, the demo schema's
// catalog as demo/schema.ts makes it, for the tests, benches and client types that have no database at hand.
// tests/db/demo-catalog.test.ts keeps the snapshot equal to the live catalog (`npm run demo:catalog` rewrites it).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CatalogModel } from '../lib/catalog/model.ts';
import type { Registry } from '../lib/pagination/registry.ts';
import { resolveRegistry } from '../lib/pagination/runtime.ts';

/** The demo's collections file. */
export const DEMO_FILE = fileURLToPath(new URL('./collections.yaml', import.meta.url));
/** The snapshot of the demo schema's catalog it is resolved against without a database (`npm run demo:catalog`). */
export const DEMO_CATALOG = fileURLToPath(new URL('./catalog.json', import.meta.url));
/** How problems name the file. */
const SOURCE = 'demo/collections.yaml';

/**
 * What of a catalog does not depend on the database it was read from: relation oids and the planner's row
 * estimates (which only price sorts no index serves, and the demo has none) are left out.
 */
export function catalogSnapshot(model: CatalogModel): CatalogModel {
  return {
    relations: model.relations.map((relation) => ({ ...relation, oid: 0, estimatedRows: undefined })),
  };
}

/** The demo's collections (docs/reference/api.md, "Collections"): its file resolved against the catalog snapshot. */
export function demoRegistry(): Registry {
  const catalog = JSON.parse(readFileSync(DEMO_CATALOG, 'utf8')) as CatalogModel;
  return resolveRegistry(readFileSync(DEMO_FILE, 'utf8'), SOURCE, catalog);
}
