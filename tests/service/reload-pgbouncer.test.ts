// Reloads behind PgBouncer in transaction mode (docs/how-to/schema-changes.md): the instance LISTENs on the direct
// URL, so a NOTIFY sent through the pooler reaches it; its listening connection, terminated, is made again, and the
// file and the catalog are read again then, for what was sent meanwhile.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import t from 'tap';
import { makeScratch } from '../helpers/collections.ts';
import { scratchDatabase } from '../helpers/db.ts';
import { startPgBouncer } from '../helpers/pgbouncer.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

const FILE = `
collections:
  - relation: scratch.notes
`;

t.test('behind PgBouncer, a NOTIFY through the pooler and a listening connection lost are both read', async (t) => {
  const direct = (await scratchDatabase(t)).url;
  const bouncer = await startPgBouncer(t, direct);
  const pooled = bouncer.urlOf(direct);
  const sql = postgres(direct, { max: 1, onnotice: () => {} });
  t.teardown(() => sql.end({ timeout: 1 }));
  await makeScratch(sql, 'create table notes (id int primary key, body text not null); insert into notes values (1, $$one$$);');
  const folder = await mkdtemp(path.join(tmpdir(), 'reload-pgbouncer-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  const file = path.join(folder, 'collections.yaml');
  await writeFile(file, FILE);
  const server = await startServer(t, await freePort(), { DATABASE_URL: pooled, DATABASE_DIRECT_URL: direct, COLLECTIONS: file });
  const fields = async () => {
    const res = await fetch(`${server.url}/v1/notes?limit=1`);
    const body = (await res.json()) as { notes: Record<string, unknown>[] };
    return Object.keys(body.notes[0]!).join(',');
  };
  t.equal(await fields(), 'id,body');

  // The column added and the notification sent, both through the pooler.
  const viaPooler = postgres(pooled, { max: 1, prepare: false, onnotice: () => {} });
  t.teardown(() => viaPooler.end({ timeout: 1 }));
  await viaPooler`alter table scratch.notes add column tag text`;
  await viaPooler`select pg_notify('paginated_collections_reload', 'migrated')`;
  await waitFor('the added column served', fields, { until: (names) => names === 'id,body,tag', timeoutMs: 2_000 });
  // Log lines are written at most 100 ms after they are made.
  await waitFor('the reading logged', () =>
    /\(read again: NOTIFY paginated_collections_reload 'migrated'; read in \d+ ms\)/.test(server.output()),
  );

  // The listening connection terminated, a change made meanwhile with nobody to tell: read once it listens again.
  const [terminated] = await sql`
    select count(*)::int as n from (
      select pg_terminate_backend(pid) from pg_stat_activity where query ilike 'listen %' and datname = current_database()) t`;
  t.equal(terminated!.n, 1, 'one listening connection');
  await sql`alter table scratch.notes add column more int`;
  await waitFor('the column added while nobody listened', fields, { until: (names) => names === 'id,body,tag,more', timeoutMs: 5_000 });
  await waitFor('the connection lost and made again, logged', () =>
    /Reload notifications: the connection was lost[\s\S]*Reload notifications: listening again on paginated_collections_reload/.test(
      server.output(),
    ),
  );
  // A column added fails no statement: only the NOTIFY, on the connection made again, tells.
  await sql`alter table scratch.notes add column last text`;
  await sql`notify paginated_collections_reload`;
  await waitFor('a NOTIFY on the connection made again', fields, { until: (names) => names === 'id,body,tag,more,last', timeoutMs: 2_000 });
});
