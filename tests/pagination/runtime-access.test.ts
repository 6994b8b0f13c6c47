// A collection's access as the registry holds it (lib/pagination/runtime.ts, collectionOf): each row rule's claim
// path and field, the served field where the column is served, else a field of its own that no parameter names,
// no item shows, and that a statement compares as the table's column.
import { sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import t from 'tap';
import { makeScratch, scratchRegistry } from '../helpers/collections.ts';
import { emptyDatabase } from '../helpers/db.ts';

const DDL = `
  create table orders (id int primary key, tenant_id int not null, total int not null);
  create index on orders (tenant_id, id);
  create table events (id int primary key, tenant_id uuid not null, region text, kind text not null);
  create index on events (region, tenant_id, id);
  insert into events values
    (1, '6f1c1a52-0b59-4a59-9d0e-3c6a1d1b2f10', 'eu', 'a'),
    (2, '6f1c1a52-0b59-4a59-9d0e-3c6a1d1b2f10', 'us', 'b'),
    (3, '0d1e2f30-0000-4000-8000-000000000000', 'eu', 'c');`;

const FILE = `
collections:
  - relation: scratch.orders
    fieldNames: camelCase
    columns: [id, tenant_id, total]
    access: { rows: { tenant_id: tenant } }
  - relation: scratch.events
    columns: [id, kind]
    access: { rows: { tenant_id: app_metadata.tenant, region: region } }
  - relation: scratch.orders
    name: public-orders
    columns: [id, total]
  - relation: scratch.orders
    name: keyed-orders
    columns: [id, total]
    access: { anonymous: false }
`;

t.test("row rules in the registry: the served field, or one of the rule's own", async (t) => {
  const { sql: session } = await emptyDatabase(t);
  await makeScratch(session, DDL);
  const registry = await scratchRegistry(session, FILE);

  const orders = registry.get('orders')!;
  t.equal(orders.access.anonymous, false);
  t.equal(orders.access.rows.length, 1);
  t.same(orders.access.rows[0]!.claim, ['tenant']);
  t.equal(orders.access.rows[0]!.field, orders.fields.get('tenantId'), 'the served field itself');

  const events = registry.get('events')!;
  t.equal(events.access.anonymous, false);
  t.same(
    events.access.rows.map((rule) => [rule.field.name, rule.claim, rule.field.type, rule.field.nullable]),
    [
      ['@tenant_id', ['app_metadata', 'tenant'], 'uuid', false],
      ['@region', ['region'], 'text', true],
    ],
  );
  t.same([...events.fields.keys()], ['id', 'kind'], 'not among the fields');
  t.same(Object.keys(events.selection), ['id', 'kind'], 'nor selected');
  t.same(Object.keys(events.filters), ['id'], 'nor filtered by a parameter (eq on id, which the index has after both rule columns)');
  const [tenant, region] = events.access.rows.map((rule) => rule.field);
  t.equal(tenant!.value.parse('app_metadata.tenant', '6F1C1A52-0B59-4A59-9D0E-3C6A1D1B2F10'), '6f1c1a52-0b59-4a59-9d0e-3c6a1d1b2f10');

  // The rule's condition over the collection's table, as a statement of the request writes it.
  const query = new PgDialect().sqlToQuery(
    sql`select ${events.selection.id} from ${events.table} where ${tenant!.column} = ${tenant!.value.literal('6f1c1a52-0b59-4a59-9d0e-3c6a1d1b2f10')} and ${region!.column} = ${region!.value.literal('eu')}`,
  );
  t.match(query.sql, '"events"."tenant_id"');
  const rows = await session.unsafe(query.sql, query.params as never[]);
  t.same(
    rows.map((row) => row.id),
    [1],
  );

  t.same(registry.get('public-orders')!.access, { anonymous: true, rows: [] }, 'no access: everyone, every row');
  t.same(registry.get('keyed-orders')!.access, { anonymous: false, rows: [] }, 'credentials, every row');
});
