// The demo is served from its file like any team's (demo/collections.yaml, on the live catalog); tests, benches and
// the client's types resolve the same file against demo/catalog.json. Both must be one registry: the snapshot is
// what the demo's migrations make (regenerate: npm run demo:catalog), and the two resolve to the same collections.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { SERVICE_SCHEMA } from '../../db/service-schema.ts';
import { DEMO_CATALOG, DEMO_FILE, demoRegistry } from '../../demo/collections.ts';
import { openApiDocument } from '../../lib/openapi/document.ts';
import { loadRegistry } from '../../lib/pagination/runtime.ts';
import { demoCatalogText, withDemoDatabase } from '../../scripts/demo-catalog.ts';
import { scratchSession, serverUrl } from '../helpers/db.ts';

t.test('demo/catalog.json is the catalog the demo migrations make, and the file resolves to one registry on both', async (t) => {
  await withDemoDatabase(serverUrl(), async (url) => {
    t.equal(readFileSync(DEMO_CATALOG, 'utf8'), await demoCatalogText(url), 'demo/catalog.json is up to date: run `npm run demo:catalog`');
    const sql = scratchSession(t, url);
    const live = await loadRegistry(sql, readFileSync(DEMO_FILE, 'utf8'), 'demo/collections.yaml', { serviceSchema: SERVICE_SCHEMA });
    const snapshot = demoRegistry();
    t.same([...live.keys()], ['products', 'orders', 'events']);
    t.same(openApiDocument(live), openApiDocument(snapshot), 'the same document');
    for (const [name, collection] of live) {
      const other = snapshot.get(name)!;
      // The planner's estimate prices only sorts no index serves; the demo has none (cost.indexed covers every order).
      const { unindexedSort: _live, ...liveCost } = collection.cost;
      const { unindexedSort: _snapshot, ...snapshotCost } = other.cost;
      t.same(
        { ...collection, cost: liveCost, table: undefined, fields: undefined, selection: undefined },
        { ...other, cost: snapshotCost, table: undefined, fields: undefined, selection: undefined },
        `${name}: the same settings`,
      );
      t.same(
        [...collection.fields.values()].map((field) => [field.name, field.type, field.nullable, field.column.name]),
        [...other.fields.values()].map((field) => [field.name, field.type, field.nullable, field.column.name]),
        `${name}: the same fields`,
      );
    }
  });
});
