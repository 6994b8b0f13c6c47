// Access across instances (docs/reference/api.md, "Access"): two server processes on one database; a key's
// collections and claims changed through one instance's operator API are applied by the other from its next
// request on, and a key from POST /v1/keys (no claims) reads what has no row rule and nothing that has one.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { makeScratch } from '../helpers/collections.ts';
import { testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

const DDL = `
  create table notes (id int primary key, tenant_id int not null, body text not null);
  create index on notes (tenant_id, id);
  create table open_notes (id int primary key, body text not null);
  insert into notes select n, 1 + n % 3, 'note ' || n from generate_series(1, 30) n;
  insert into open_notes select n, 'open ' || n from generate_series(1, 5) n;`;

const FILE = `
collections:
  - relation: scratch.notes
    columns: [id, tenant_id, body]
    access: { rows: { tenant_id: tenant } }
  - relation: scratch.open_notes
    columns: [id, body]
`;

t.test('a change of a key through one instance is applied by another at its next request', async (t) => {
  const db = await testDatabase(t);
  await makeScratch(db.sql, DDL);
  const folder = await mkdtemp(path.join(tmpdir(), 'access-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  const file = path.join(folder, 'collections.yaml');
  await writeFile(file, FILE);
  const env = { DATABASE_URL: db.url, COLLECTIONS: file, ADMIN_TOKEN };
  const [one, two] = await Promise.all([startServer(t, await freePort(), env), startServer(t, await freePort(), env)]);
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

  const made = await fetch(`${one.url}/admin/keys`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ tier: 'free', claims: { tenant: 1 } }),
  });
  t.equal(made.status, 201);
  const { id, key } = (await made.json()) as { id: string; key: string };
  const read = async (server: typeof one, name: string) => {
    const res = await fetch(`${server.url}/v1/${name}?page-size=100`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as Record<string, any>;
    return { status: res.status, tenants: res.status === 200 ? [...new Set(body[name].map((item: any) => item.tenant_id))] : body.code };
  };
  t.same(await read(two, 'notes'), { status: 200, tenants: [1] }, 'the other instance reads the new key as tenant 1');

  const patch = (body: unknown) => fetch(`${one.url}/admin/keys/${id}`, { method: 'PATCH', headers: admin, body: JSON.stringify(body) });
  t.equal((await patch({ claims: { tenant: 2 } })).status, 200);
  t.same(await read(two, 'notes'), { status: 200, tenants: [2] }, 'a claim changed through one instance: the next request at the other');
  t.equal((await patch({ collections: ['open_notes'] })).status, 200);
  t.same(await read(two, 'notes'), { status: 403, tenants: 'insufficient_scope' }, 'collections narrowed: notes refused');
  t.equal((await read(two, 'open_notes')).status, 200);
  t.equal((await patch({ collections: null })).status, 200);
  t.same(await read(two, 'notes'), { status: 200, tenants: [2] }, 'every collection again');
  const shown = await fetch(`${two.url}/admin/keys/${id}`, { headers: admin });
  t.match(await shown.json(), { id, collections: null, claims: { tenant: 2 } }, 'GET /admin/keys/{id} at the other instance');

  const issued = await fetch(`${two.url}/v1/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.equal(issued.status, 201, await issued.clone().text());
  const selfServe = { authorization: `Bearer ${((await issued.json()) as { key: string }).key}` };
  t.equal(
    (await fetch(`${one.url}/v1/open_notes`, { headers: selfServe })).status,
    200,
    'a key from POST /v1/keys reads what has no row rule',
  );
  const ruled = await fetch(`${one.url}/v1/notes`, { headers: selfServe });
  t.equal(ruled.status, 403, 'and nothing with one: it has no claims');
  t.equal(((await ruled.json()) as { code: string }).code, 'insufficient_scope');
});
