// Start-up: one warning line when the PostgreSQL server runs with autovacuum off, which the rate limiter's
// table needs (docs/how-to/own-database.md, "Autovacuum"). Autovacuum is a server setting, so a private cluster has it off.
import t from 'tap';
import { startCluster } from '../helpers/cluster.ts';
import { scratchSession, testDatabase, withSession } from '../helpers/db.ts';
import { logLines } from '../helpers/logs.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

const WARNING = /^autovacuum is (\S+) on this PostgreSQL server; the rate limiter's table rate_windows needs it/;

/** The start-up output's autovacuum warnings (log lines at `warn`), the message of each. */
function warnings(output: string): string[] {
  return logLines(output)
    .filter((line) => line.level === 40 && WARNING.test(String(line.msg)))
    .map((line) => String(line.msg));
}

async function autovacuumOf(url: string): Promise<string> {
  const [row] = await withSession(url, (sql) => sql`show autovacuum`);
  return row!.autovacuum as string;
}

t.test('a server with autovacuum off: one warning line; with it on: none', async (t) => {
  const cluster = await startCluster(t, { autovacuum: 'off' });
  t.equal(await autovacuumOf(cluster.url()), 'off', 'the private cluster runs with autovacuum off');
  const off = await startServer(t, await freePort(), { DATABASE_URL: cluster.url() });
  const lines = warnings(off.output());
  t.equal(lines.length, 1, `one warning line:\n${off.output()}`);
  t.match(lines[0], /^autovacuum is off on this PostgreSQL server; .*\(docs\/how-to\/own-database\.md, "Autovacuum"\)$/);

  const admin = scratchSession(t, cluster.url());
  await admin`alter system set autovacuum = on`;
  await admin`select pg_reload_conf()`;
  await waitFor('autovacuum on after the reload', () => autovacuumOf(cluster.url()), {
    until: (value) => value === 'on',
    timeoutMs: 10_000,
  });
  const on = await startServer(t, await freePort(), { DATABASE_URL: cluster.url() });
  t.same(warnings(on.output()), [], `no warning:\n${on.output()}`);
});

t.test('on the test server: the warning is there exactly when its autovacuum is off', async (t) => {
  const db = await testDatabase(t);
  const setting = await autovacuumOf(db.url);
  const server = await startServer(t, await freePort(), { DATABASE_URL: db.url });
  const lines = warnings(server.output());
  t.same(
    lines.map((line) => WARNING.exec(line)![1]),
    setting === 'on' ? [] : [setting],
    `show autovacuum says ${setting}:\n${server.output()}`,
  );
});
