// Host lists and target_session_attrs, as postgres.js with the project's patch reads them (patches/README.md, "Host
// lists"), on a real primary and its streaming standby (tests/helpers/cluster.ts): read-write is the primary
// wherever it is listed, each mode picks as libpq does, a host that refuses or never answers is skipped, a round
// with no suitable host fails once instead of looping, a cancel reaches the host that runs the statement, a FATAL
// rejects its statement with the server's own error; then the service on such URLs names the host that answers in
// its logs and /metrics.
import net from 'node:net';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import postgres, { type Sql } from 'postgres';
import t, { type Test } from 'tap';
import { onServer, poolStatsOf, takeCanceller } from '../../db/driver.ts';
import { runMigrations } from '../../db/migrate.ts';
import { migrateDemo } from '../../demo/migrate.ts';
import { seedTable } from '../../demo/seed.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { startCluster } from '../helpers/cluster.ts';
import { logLines } from '../helpers/logs.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

const primary = await startCluster(t);
await runMigrations(primary.url());
await migrateDemo(primary.url());
{
  const sql = postgres(primary.url(), { max: 1, onnotice: () => {} });
  await seedTable(sql, 'products', 50);
  await seedTable(sql, 'orders', 5);
  await seedTable(sql, 'events', 5);
  await sql.end();
}
const standby = await startCluster(t, {}, { standbyOf: primary });
/** A port nothing listens on: its connections are refused. */
const refused = await freePort();
/** A port that accepts connections and never answers: its connections time out. */
const accepted: net.Socket[] = [];
const silent = net.createServer((socket) => accepted.push(socket));
await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
t.teardown(() => {
  for (const socket of accepted) socket.destroy();
  silent.close();
});
const silentPort = (silent.address() as net.AddressInfo).port;

const hostsOf = (...ports: number[]) => ports.map((port) => `127.0.0.1:${port}`).join(',');
const urlOf = (ports: number[], attrs?: string) =>
  `postgres://postgres@${hostsOf(...ports)}/postgres${attrs === undefined ? '' : `?target_session_attrs=${attrs}`}`;

function client(url: string, options: postgres.Options<Record<string, postgres.PostgresType>> = {}): Sql {
  return postgres(url, { max: 1, connect_timeout: 1, onnotice: () => {}, ...options });
}

/** The port of the server a fresh client of `url` answers from. */
async function answering(url: string): Promise<number> {
  const sql = client(url);
  try {
    const [row] = await sql<{ port: number }[]>`select inet_server_port() as port`;
    return row!.port;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

t.test('read-write and primary: the primary, wherever it is listed', async (t) => {
  // Why read-write needs more than default_transaction_read_only: a PostgreSQL 14+ standby reports it off.
  const sql = client(standby.url());
  t.teardown(() => sql.end({ timeout: 1 }));
  const [state] =
    await sql`select current_setting('default_transaction_read_only') as dtro, current_setting('transaction_read_only') as tro,
    current_setting('in_hot_standby') as hot`;
  t.same(state, { dtro: 'off', tro: 'on', hot: 'on' }, "the standby's default_transaction_read_only is off: only in_hot_standby tells");
  for (const order of [
    [standby.port, primary.port],
    [primary.port, standby.port],
  ]) {
    for (const attrs of ['read-write', 'primary']) {
      t.equal(await answering(urlOf(order, attrs)), primary.port, `${attrs}, hosts ${order.join(',')}: the primary`);
    }
  }
});

t.test('standby, read-only, prefer-standby: the standby; any: the first host', async (t) => {
  for (const order of [
    [standby.port, primary.port],
    [primary.port, standby.port],
  ]) {
    for (const attrs of ['standby', 'read-only', 'prefer-standby']) {
      t.equal(await answering(urlOf(order, attrs)), standby.port, `${attrs}, hosts ${order.join(',')}: the standby`);
    }
    t.equal(await answering(urlOf(order, 'any')), order[0], `any, hosts ${order.join(',')}: the first`);
    t.equal(await answering(urlOf(order)), order[0], `no target_session_attrs, hosts ${order.join(',')}: the first`);
  }
  t.equal(await answering(urlOf([refused, primary.port], 'prefer-standby')), primary.port, 'prefer-standby, no standby up: the primary');
  t.equal(await answering(urlOf([primary.port, refused], 'prefer-standby')), primary.port, 'whether it is listed first or last');
});

t.test('a host that refuses connections, or never answers one, is skipped for the next', async (t) => {
  t.equal(
    await answering(urlOf([refused, standby.port, primary.port], 'read-write')),
    primary.port,
    'refused, then the standby, then the primary',
  );
  const started = performance.now();
  t.equal(await answering(urlOf([silentPort, primary.port], 'read-write')), primary.port, 'a host whose connection times out');
  t.ok(performance.now() - started < 3000, 'after its connect_timeout (1 s)');
});

t.test("no host will do: the round fails once with the last host's error, and the next query tries again", async (t) => {
  for (const [ports, code] of [
    [[refused, standby.port], 'CONNECTION_UNSUITABLE'],
    [[standby.port, refused], 'ECONNREFUSED'],
    [[standby.port, standby.port], 'CONNECTION_UNSUITABLE'],
  ] as const) {
    const sql = client(urlOf([...ports], 'read-write'));
    const started = performance.now();
    await t.rejects(sql`select 1`, { code }, `hosts ${ports.join(',')}: ${code}`);
    t.ok(performance.now() - started < 1000, `at once (${Math.round(performance.now() - started)} ms), not a loop over the hosts`);
    await t.rejects(sql`select 1`, { code }, 'a second query makes a round of its own');
    await sql.end({ timeout: 1 });
  }
  const sql = client(urlOf([standby.port], 'read-write'));
  await t.rejects(sql`select 1`, {
    code: 'CONNECTION_UNSUITABLE',
    message: /127\.0\.0\.1:\d+ does not meet target_session_attrs=read-write/,
  });
  await sql.end({ timeout: 1 });
});

/** Waits until a statement of the client named `application` sleeps on the primary. */
async function sleeping(t: Test, application: string): Promise<Sql> {
  const admin = client(primary.url());
  t.teardown(() => admin.end({ timeout: 1 }));
  await waitFor(
    `${application}'s statement to run on the primary`,
    () => admin`select 1 from pg_stat_activity where application_name = ${application} and query like '%pg_sleep%' and state = 'active'`,
    {
      until: (rows) => rows.length === 1,
      intervalMs: 10,
    },
  );
  return admin;
}

t.test("a cancel goes to the host whose backend runs the statement, not the list's first", async (t) => {
  const sql = client(urlOf([standby.port, primary.port], 'read-write'), { connection: { application_name: 'cancel-test' } });
  t.teardown(() => sql.end({ timeout: 1 }));
  const query = sql`select pg_sleep(10)`;
  const settled = query.then(
    () => 'finished',
    (error: { code?: string }) => error.code,
  );
  await sleeping(t, 'cancel-test');
  const cancel = takeCanceller(query);
  t.type(cancel, 'function', 'the pool gave the query its canceller');
  const started = performance.now();
  await cancel!();
  t.equal(await settled, '57014', 'cancelled (query_canceled), not left to sleep on');
  t.ok(performance.now() - started < 2000, 'at once');
});

t.test("a FATAL for the running statement rejects it with the server's own error", async (t) => {
  const sql = client(urlOf([standby.port, primary.port], 'read-write'), { connection: { application_name: 'fatal-test' } });
  t.teardown(() => sql.end({ timeout: 1 }));
  const query = sql`select pg_sleep(10)`;
  const settled = query.catch((error: unknown) => error);
  const admin = await sleeping(t, 'fatal-test');
  await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'fatal-test'`;
  // 57P01 says the server ended the statement, which so committed nothing; CONNECTION_CLOSED would say nothing.
  t.match(await settled, { code: '57P01', severity: 'FATAL' }, 'admin_shutdown, not CONNECTION_CLOSED');
});

t.test('which host answers: poolStats().servers and the onserver hook', async (t) => {
  const opened: string[] = [];
  const sql = postgres(urlOf([standby.port, primary.port], 'read-write'), {
    max: 2,
    onnotice: () => {},
    ...onServer((server) => opened.push(server)),
  });
  t.teardown(() => sql.end({ timeout: 1 }));
  await Promise.all([sql`select pg_sleep(0.05)`, sql`select pg_sleep(0.05)`]);
  const primaryHost = `127.0.0.1:${primary.port}`;
  t.same(poolStatsOf(sql)!().servers, { [primaryHost]: 2 }, 'both connections open to the primary');
  t.same(opened, [primaryHost, primaryHost], 'each told when it opened, never the standby it passed');
});

t.test('the service on host lists: the primary for DATABASE_URL, the standby for DATABASE_READ_URL, each named', async (t) => {
  const server = await startServer(t, await freePort(), {
    DATABASE_URL: urlOf([standby.port, primary.port], 'read-write'),
    DATABASE_READ_URL: urlOf([primary.port, standby.port], 'standby'),
    ADMIN_TOKEN,
  });
  const res = await fetch(`${server.url}/v1/products?limit=2`);
  t.equal(res.status, 200, 'a collection served, from the standby');
  await res.arrayBuffer();
  // A key is written through DATABASE_URL's pool, which so opens a connection.
  const issued = await fetch(`${server.url}/v1/keys`, { method: 'POST' });
  t.equal(issued.status, 201, 'a key issued, on the primary');
  await issued.arrayBuffer();
  const metrics = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const family = parsePrometheusTextFormat(await metrics.text()).find((each) => each.name === 'db_server_connections');
  const open = (pool: string) =>
    Object.fromEntries((family?.metrics ?? []).filter((m) => m.labels?.pool === pool).map((m) => [m.labels!.server, Number(m.value)]));
  t.same(Object.keys(open('primary')), [`127.0.0.1:${primary.port}`], "DATABASE_URL's pool is open to the primary");
  t.same(Object.keys(open('limiter')), [`127.0.0.1:${primary.port}`], "and so is the limiter's connection");
  t.same(Object.keys(open('replica')), [`127.0.0.1:${standby.port}`], "DATABASE_READ_URL's pool to the standby");
  const limiter = `The rate limiter's connection to ${hostsOf(primary.port, standby.port).split(',').sort().join(',')}/postgres`;
  for (const [client, port] of [
    ["DATABASE_URL's pool", primary.port],
    [limiter, primary.port],
    ["DATABASE_READ_URL's pool", standby.port],
  ] as const) {
    const line = `${client} is open to 127.0.0.1:${port}`;
    await waitFor(`the line "${line}"`, () => logLines(server.output()).some((each) => each.msg === line), { until: (found) => found });
    t.pass(`a log line names the host that answers ${client}`);
  }
});

t.test("LIMITER_DATABASE_URL as a host list: the limiter decides on the pair's primary", async (t) => {
  const admin = client(primary.url());
  t.teardown(() => admin.end({ timeout: 1 }));
  await admin`create database limiter`;
  const limiterUrl = `postgres://postgres@${hostsOf(standby.port, primary.port)}/limiter?target_session_attrs=read-write`;
  const server = await startServer(t, await freePort(), { DATABASE_URL: primary.url(), LIMITER_DATABASE_URL: limiterUrl });
  const res = await fetch(`${server.url}/v1`);
  t.equal(res.status, 200, 'served');
  await res.arrayBuffer();
  const onLimiter = client(`postgres://postgres@127.0.0.1:${primary.port}/limiter`);
  t.teardown(() => onLimiter.end({ timeout: 1 }));
  const [row] = await onLimiter`select count(*)::int as subjects from paginated_collections.rate_windows`;
  t.equal(row!.subjects, 1, "the decision's row is in the limiter database, on the primary");
  const identity = `${hostsOf(primary.port, standby.port).split(',').sort().join(',')}/limiter`;
  for (const line of [
    `Rate limiter on ${identity}; keys and tiers from ${identity}, the oldest by its record`,
    `The rate limiter's connection to ${identity} is open to 127.0.0.1:${primary.port}`,
  ]) {
    await waitFor(`the line "${line}"`, () => logLines(server.output()).some((each) => each.msg === line), { until: (found) => found });
    t.pass(line);
  }
});
