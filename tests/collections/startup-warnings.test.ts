// Start-up warns, one line each at `warn`, of what a collections file serves by default that it may not mean to: a
// served column whose name says it holds a secret, a collection without a columns list (lib/collections/safe-defaults.ts).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { scratchDatabase, withSession } from '../helpers/db.ts';
import { logLines } from '../helpers/logs.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

t.test('a file that serves a password hash and lists no columns: served, with a warning line each', async (t) => {
  const { url } = await scratchDatabase(t);
  await withSession(url, (sql) =>
    sql.unsafe('create table users (id int primary key, email text not null, password_hash text, api_token text)'),
  );
  const folder = await mkdtemp(path.join(tmpdir(), 'collections-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  const file = path.join(folder, 'collections.yaml');
  await writeFile(
    file,
    'collections:\n  - relation: public.users\n  - relation: public.users\n    name: listed\n    columns: [id, email]\n',
  );
  const server = await startServer(t, await freePort(), { DATABASE_URL: url, COLLECTIONS: file });
  const warnings = logLines(server.output())
    .filter((line) => line.level === 40 && String(line.msg).startsWith('Warning: collections file'))
    .map((line) => line.msg);
  const prefix = `Warning: collections file ${file}, collection users:`;
  t.same(
    warnings,
    [
      `${prefix} no columns list: it serves every column of public.users, and any column added to it once the catalog is read again; list the columns to serve`,
      `${prefix} column password_hash is served, and its name says it holds a secret (password): leave it out unless every client may read it`,
      `${prefix} column api_token is served, and its name says it holds a secret (token): leave it out unless every client may read it`,
    ],
    `none of the collection with its columns listed:\n${server.output()}`,
  );
  const response = await fetch(`${server.url}/v1/users?limit=1`);
  t.equal(response.status, 200, 'served all the same');
});
