// An answer the service failed costs nothing (docs/reference/costs.md, "The rule"): a chunk whose statement fails
// (a 500) and a collection whose table went away under it (a 503) give back all they were charged.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { makeScratch, registryAhead } from '../helpers/collections.ts';

const DDL = `
  create table things (id int primary key, n int not null);
  insert into things select i, i from generate_series(1, 10) i;
  -- Reading the row of id 3 divides by zero.
  create view fragile as select id, 10 / (id - 3) as x from things;`;
const FILE = `
collections:
  - relation: scratch.things
    columns: [id, n]
  - relation: scratch.fragile
    columns: [id, x]
    key: [id]
    unindexedSorts: true
    cost: { unindexedSort: 1 }
`;

t.test('a 500 and a 503 are never charged', async (t) => {
  const api = await testApp(t, { registry: await registryAhead(t, DDL, FILE), rateLimit: true });
  await makeScratch(api.database.sql, DDL);
  const remaining = (res: Response) => Number(res.headers.get('x-ratelimit-remaining'));
  const first = await api.request('/v1/things?page-size=2');
  t.equal(first.status, 200);
  const before = remaining(first);

  const failed = await api.request('/v1/fragile?page-size=5');
  t.equal(failed.status, 500, 'the statement failed');
  t.equal(remaining(failed), before, 'nothing charged for it');
  const after500 = await api.request('/v1/things?page-size=2');
  t.equal(after500.status, 200);

  await api.database.sql.unsafe('alter table scratch.things drop column n cascade');
  const gone = await api.request('/v1/things?page-size=2');
  t.equal(gone.status, 503, 'the collection met a changed catalog');
  t.equal(((await gone.json()) as { code: string }).code, 'collection_unavailable');
  t.equal(remaining(gone), remaining(after500), 'nothing charged for it');
});
