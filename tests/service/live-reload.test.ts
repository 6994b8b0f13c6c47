// Schema changes while serving (docs/how-to/schema-changes.md): two server processes on one database, under load from
// a few clients, while a served column, an index and a table are dropped, a column changes type, columns and indexes
// are added (the event trigger's NOTIFY), the file is edited (SIGHUP) and a materialized view is emptied. No answer is
// a 500, no request of a collection left alone fails, each change is served (or refused as unavailable) at both
// instances within 2 s of its NOTIFY or SIGHUP, or of the statement that met it; an instance restarted with a broken
// collection serves every other.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { makeScratch } from '../helpers/collections.ts';
import { testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { logLines } from '../helpers/logs.ts';
import { freePort, stopProcess } from '../helpers/processes.ts';
import { type ServerProcess, startServer } from '../helpers/servers.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

const DDL = `
  create table stable (id int primary key, label text not null);
  insert into stable select n, 'stable ' || n from generate_series(1, 200) n;
  create table people (id int primary key, name text not null, nick text, score int not null);
  insert into people select n, 'person ' || n, 'nick ' || n, n % 97 from generate_series(1, 500) n;
  create table events (id int primary key, n int not null);
  insert into events select i, i from generate_series(1, 300) i;
  create table tags (id int primary key, label text not null);
  create index tags_label on tags (label, id);
  insert into tags select n, md5(n::text) from generate_series(1, 6000) n;
  create table wide (id int primary key, a text not null);
  insert into wide select n, 'a' || n from generate_series(1, 100) n;
  create table gone (id int primary key, body text not null);
  insert into gone select n, 'body ' || n from generate_series(1, 50) n;
  create materialized view shelf as select n as id, 'shelf ' || n as title from generate_series(1, 80) n;
  create unique index on shelf (id);
`;

function file(peopleColumns: string, peopleMax: number): string {
  return `
collections:
  - relation: scratch.stable
    columns: [id, label]
  - relation: scratch.people
    columns: [${peopleColumns}]
    pageSize: { max: ${peopleMax} }
  - relation: scratch.events
    columns: [id, n]
    filters: { n: [eq] }
  - relation: scratch.tags
    columns: [id, label]
    sort: [label]
    unindexedSorts: true
    cost: { unindexedSort: 50 }
  - relation: scratch.wide
  - relation: scratch.gone
    columns: [id, body]
  - relation: scratch.shelf
    columns: [id, title]
    key: [id]
`;
}

/** The event trigger a team installs to send DDL notifications: the page's one SQL block, as written there. */
const EVENT_TRIGGER = /^```sql\n([^`]*)^```$/m.exec(
  readFileSync(new URL('../../docs/how-to/schema-changes.md', import.meta.url), 'utf8'),
)![1]!;

const COLLECTIONS = ['stable', 'people', 'events', 'tags', 'wide', 'gone', 'shelf'] as const;
type Name = (typeof COLLECTIONS)[number];

interface Sample {
  readonly collection: Name;
  readonly status: number;
  readonly code: string | undefined;
  readonly at: number;
}

t.test('schema changes under load at two instances: no 500, the others unharmed, each change seen within 2 s', async (t) => {
  const started = performance.now();
  const db = await testDatabase(t);
  await makeScratch(db.sql, DDL);
  // Analyzed now: autovacuum's first analyze, at a moment of its own, would change the tables' estimated rows, by
  // which an unindexed sort is priced, and so what is served (a new generation) while the test counts generations.
  await db.sql`analyze`;
  // The load is one client address: a tier it never exhausts.
  await setTier(db.sql, 'anonymous', { allowance: 10_000_000, windowSeconds: 60, concurrency: 1000 });
  const folder = await mkdtemp(path.join(tmpdir(), 'live-reload-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  const collections = path.join(folder, 'collections.yaml');
  await writeFile(collections, file('id, name, nick, score', 100));
  const env = { DATABASE_URL: db.url, COLLECTIONS: collections, LOG_LEVEL: 'info' };
  let servers: ServerProcess[] = await Promise.all([startServer(t, await freePort(), env), startServer(t, await freePort(), env)]);

  // The load: four clients, each asking every collection in turn at both instances, until the test ends.
  const samples: Sample[] = [];
  let loading = true;
  const client = async (offset: number) => {
    for (let i = offset; loading; i++) {
      const collection = COLLECTIONS[i % COLLECTIONS.length]!;
      const server = servers[i % servers.length]!;
      const res = await fetch(`${server.url}/v1/${collection}?limit=5`).catch(() => undefined);
      if (res === undefined) continue; // an instance restarting
      const body = (await res.json()) as { code?: string };
      samples.push({ collection, status: res.status, code: body.code, at: performance.now() });
    }
  };
  const load = [0, 1, 2, 3].map((offset) => client(offset));
  t.teardown(async () => {
    loading = false;
    await Promise.all(load);
  });

  /** How long after `since` each instance first answered `path` as `seen` says. */
  const seenWithin = async (what: string, since: number, path: string, seen: (status: number, body: any) => boolean) => {
    const times = await Promise.all(
      servers.map((server) =>
        waitFor(
          `${what} at ${server.url}`,
          async () => {
            const res = await fetch(`${server.url}${path}`);
            const body = await res.json();
            return seen(res.status, body) ? performance.now() - since : undefined;
          },
          { until: (ms) => ms !== undefined, timeoutMs: 5_000, intervalMs: 20 },
        ),
      ),
    );
    const slowest = Math.round(Math.max(...(times as number[])));
    t.ok(slowest <= 2_000, `${what}: at both instances within ${slowest} ms`);
  };
  const unavailable = (status: number, body: any) => status === 503 && body.code === 'collection_unavailable';
  const notify = () => db.sql`select pg_notify('paginated_collections_reload', '')`;
  const hangUp = async () => {
    await Promise.all(servers.map((server) => server.child.kill('SIGHUP')));
  };

  await sleep(300); // the load under way
  t.equal(((await (await fetch(`${servers[0]!.url}/v1/people?limit=300`)).json()) as any).code, 'invalid_parameter', 'limit=300 over max');

  // 1. A served column dropped, no NOTIFY: the statement that meets it has the catalog read again.
  let since = performance.now();
  await db.sql`alter table scratch.people drop column nick`;
  await seenWithin('people unavailable after its column was dropped, without NOTIFY', since, '/v1/people?limit=5', unavailable);
  // The statement that met the change is answered Retry-After 1; once the catalog is read again, 5.
  await seenWithin('people listed unavailable by /readyz', since, '/readyz', (status, body) => {
    return status === 200 && body.collections.generation === 2 && body.collections.unavailable.includes('people');
  });
  const refused = await fetch(`${servers[1]!.url}/v1/people`);
  t.equal(refused.headers.get('retry-after'), '5', 'Retry-After while it stays unavailable');
  t.equal(refused.headers.get('content-type'), 'application/problem+json');

  // 2. The file edited (nick left out, pageSize.max raised), SIGHUP.
  await writeFile(collections, file('id, name, score', 500));
  since = performance.now();
  await hangUp();
  await seenWithin('the edited file served after SIGHUP', since, '/v1/people?limit=300', (status, body) => {
    return status === 200 && body.people.length === 300 && !('nick' in body.people[0]);
  });

  // 3. An index dropped: its order is no longer priced as indexed (an offset along it: 1 + 4000 / 1000 units, then the
  // unindexed sort's 50 and the offset along the key's index).
  const priced = async (server: ServerProcess, probe: string) => {
    const res = await fetch(`${server.url}/v1/tags?sort=label&offset=4000&limit=1&count=none`, { headers: { 'x-request-id': probe } });
    t.equal(res.status, 200, probe);
    const line = await waitFor(`the log line of ${probe}`, () => logLines(server.output()).find((line) => line.reqId === probe), {
      until: (line) => line !== undefined,
      timeoutMs: 2_000,
    });
    return line.cost as number;
  };
  t.same([await priced(servers[0]!, 'price-0a'), await priced(servers[1]!, 'price-1a')], [5, 5], 'along the index');
  since = performance.now();
  await db.sql`drop index scratch.tags_label`;
  await notify();
  let probes = 0;
  const repriced = await Promise.all(
    servers.map((server) =>
      waitFor('the new price', () => priced(server, `price-b${probes++}`), { until: (cost) => cost === 51, timeoutMs: 2_000 }),
    ),
  );
  t.same(repriced, [51, 51], 'priced as an unindexed sort');
  t.ok(performance.now() - since <= 2_000, 'within 2 s of the NOTIFY');

  // 4. A column's type changed (integer to bigint), NOTIFY: a value only bigint holds is taken.
  t.equal((await fetch(`${servers[0]!.url}/v1/events?n=3000000000`)).status, 400, 'out of integer range: a 400');
  since = performance.now();
  await db.sql`alter table scratch.events alter column n type bigint`;
  await notify();
  await seenWithin('n=3000000000 taken after the type change', since, '/v1/events?n=3000000000', (status, body) => {
    return status === 200 && body.events.length === 0;
  });

  // 5. Columns and an index added: the event trigger sends the NOTIFY.
  await db.sql.unsafe(EVENT_TRIGGER).simple();
  since = performance.now();
  await db.sql.begin(async (tx) => {
    await tx`alter table scratch.wide add column extra text not null default 'x', add column more int`;
    await tx`create index on scratch.wide (extra, id)`;
  });
  await seenWithin('the added columns and index served, from the event trigger', since, '/v1/wide?sort=extra&limit=2', (status, body) => {
    return status === 200 && body.wide[0].extra === 'x' && 'more' in body.wide[0];
  });

  // 6. A table dropped (the event trigger again): refused as unavailable; then an instance restarted meanwhile serves
  // every other collection.
  since = performance.now();
  await db.sql`drop table scratch.gone`;
  await seenWithin('gone unavailable once dropped', since, '/v1/gone', unavailable);
  await stopProcess(servers[1]!.child);
  servers = [servers[0]!];
  const restarted = await startServer(t, await freePort(), env);
  t.match(restarted.output(), /Collection gone is unavailable, answered 503 collection_unavailable: .*no relation scratch\.gone/);
  servers = [servers[0]!, restarted];
  for (const name of COLLECTIONS) {
    const res = await fetch(`${restarted.url}/v1/${name}?limit=1`);
    t.equal(res.status, name === 'gone' ? 503 : 200, `${name} at the restarted instance`);
  }
  t.match(await (await fetch(`${restarted.url}/readyz`)).json(), {
    status: 'ready',
    collections: { generation: 1, hash: /^[0-9a-f]{12}$/, unavailable: ['gone'] },
  });

  // 7. A materialized view emptied: its statements fail (55000), no 500; refreshed, it is served again.
  since = performance.now();
  await db.sql`refresh materialized view scratch.shelf with no data`;
  await seenWithin('shelf unavailable once emptied', since, '/v1/shelf', unavailable);
  since = performance.now();
  await db.sql`refresh materialized view scratch.shelf`;
  await seenWithin('shelf served once refreshed', since, '/v1/shelf?limit=3', (status, body) => status === 200 && body.shelf.length === 3);

  loading = false;
  await Promise.all(load);
  const failed = samples.filter((sample) => sample.status !== 200);
  t.same(
    failed.filter((sample) => sample.status >= 500 && sample.code !== 'collection_unavailable'),
    [],
    'no 500, and every 503 a collection_unavailable',
  );
  const broken = new Set<Name>(['people', 'gone', 'shelf']);
  t.same(
    failed.filter((sample) => !broken.has(sample.collection)),
    [],
    'no request of a collection left whole failed',
  );
  t.ok(samples.length > 200, `under load: ${samples.length} requests`);
  for (const server of servers) {
    t.notMatch(server.output(), /"level":50/, 'no error logged');
    // How long each reading took, to tell a slow catalog read from a late one when a bound above fails.
    for (const line of logLines(server.output())) if (typeof line.msg === 'string' && line.msg.includes(' read in ')) t.comment(line.msg);
  }
  const seconds = (performance.now() - started) / 1000;
  t.ok(seconds < 60, `well under a minute (${seconds.toFixed(1)} s)`);
});
