// A URL with a host list, as db/url.ts reads it, the identity it gives a database (db/identity.ts), and what
// configuration accepts of it (lib/service/config.ts): several hosts need target_session_attrs=read-write or
// primary on the URLs that must reach a primary; LIMITER_SYNCHRONOUS_COMMIT takes PostgreSQL's five values.
import t from 'tap';
import { databaseIdentity } from '../../db/identity.ts';
import { parsePostgresUrl } from '../../db/url.ts';
import { ConfigError, parseConfig } from '../../lib/service/config.ts';

const PAIR = 'postgres://app:s%40cret@Node1.example.com:5432,10.0.0.2:5433,node3/app%20db?target_session_attrs=read-write&sslmode=prefer';

t.test('a host list: every host, the database, target_session_attrs and the rest of the URL', async (t) => {
  const url = parsePostgresUrl(PAIR);
  t.same(url.hosts, [
    { host: 'node1.example.com', port: 5432 },
    { host: '10.0.0.2', port: 5433 },
    { host: 'node3', port: undefined },
  ]);
  t.equal(url.database, 'app db');
  t.equal(url.targetSessionAttrs, 'read-write');
  t.equal(url.parsed.username, 'app', 'the user, as for a single host');
  t.equal(url.parsed.password, 's%40cret');
  t.equal(url.parsed.searchParams.get('sslmode'), 'prefer');
  t.same(parsePostgresUrl('postgres://u@h:6543/db').hosts, [{ host: 'h', port: 6543 }], 'one host');
  t.same(parsePostgresUrl('postgres:///db').hosts, [], 'none: the default host');
  t.same(parsePostgresUrl('postgres://[::1]:5432/db').hosts, [{ host: '[::1]', port: 5432 }], 'an IPv6 address as the one host');
  for (const [url, message] of [
    ['postgres://u@a,[::1]:5432/db', /IPv6 address \(\[::1\]:5432\)/],
    ['postgres://u@a,,b/db', /holds "", not a host or host:port/],
    ['postgres://u@a,b:99999/db', /holds "b:99999", whose port is not from 1 to 65535/],
    ['postgres://u@a,b:x/db', /holds "b:x"/],
  ] as const) {
    t.throws(() => parsePostgresUrl(url), { name: 'TypeError', message }, url);
  }
});

t.test("a database's identity: a host list's hosts in sorted order, one host as it always was", async (t) => {
  t.equal(databaseIdentity(PAIR), '10.0.0.2:5433,node1.example.com:5432,node3:5432/app db');
  t.equal(
    databaseIdentity('postgres://x@node3:5432,NODE1.example.com,10.0.0.2:5433/app%20db'),
    databaseIdentity(PAIR),
    'whatever the order, the case, a default port spelt out, the user or the options',
  );
  t.equal(databaseIdentity('postgres://u:p@Host/db?sslmode=require'), 'host:5432/db', 'one host: host:port/dbname');
  t.equal(databaseIdentity('postgres:///db'), ':5432/db');
});

t.test('DATABASE_URL, DATABASE_DIRECT_URL and LIMITER_DATABASE_URL: a host list that leads to the primary', async (t) => {
  const base = { COLLECTIONS: 'demo' };
  t.equal(parseConfig({ ...base, DATABASE_URL: PAIR }).databaseUrl, PAIR);
  const primary = PAIR.replace('read-write', 'primary');
  t.equal(parseConfig({ ...base, DATABASE_URL: primary, DATABASE_DIRECT_URL: primary }).databaseDirectUrl, primary);
  const other = 'postgres://u@c:5432,d:5432/lim?target_session_attrs=read-write';
  t.same(
    parseConfig({ LIMITER_DATABASE_URL: `${PAIR}, ${other},postgres://u@e/lim` }).limiterDatabaseUrls,
    [PAIR, other, 'postgres://u@e/lim'],
    'a list of URLs, some with host lists',
  );
  t.equal(
    parseConfig({ ...base, DATABASE_URL: 'postgres://u@a,b/db', PGTARGETSESSIONATTRS: 'read-write' }).databaseUrl,
    'postgres://u@a,b/db',
    'PGTARGETSESSIONATTRS stands in for the URL, as for libpq',
  );
  t.equal(
    parseConfig({ ...base, DATABASE_URL: 'postgres://u@a/db?target_session_attrs=any' }).databaseUrl,
    'postgres://u@a/db?target_session_attrs=any',
    'one host: any is fine',
  );
  for (const [env, message] of [
    [
      { DATABASE_URL: 'postgres://u@a,b/db' },
      /^Invalid DATABASE_URL: it names 2 hosts without target_session_attrs=read-write \(or primary\)/,
    ],
    [{ DATABASE_URL: 'postgres://u@a,b/db?target_session_attrs=any' }, /^Invalid DATABASE_URL: it names 2 hosts/],
    [
      { DATABASE_URL: 'postgres://u@a/db?target_session_attrs=standby' },
      /^Invalid DATABASE_URL: target_session_attrs=standby leads to a standby/,
    ],
    [
      { DATABASE_URL: 'postgres://u@a/db', PGTARGETSESSIONATTRS: 'prefer-standby' },
      /^Invalid DATABASE_URL: PGTARGETSESSIONATTRS=prefer-standby/,
    ],
    [
      { DATABASE_URL: 'postgres://u@a/db?target_session_attrs=read_write' },
      /^Invalid DATABASE_URL: target_session_attrs must be one of any, read-write/,
    ],
    [
      { DATABASE_URL: 'postgres://u@a,[::1]/db?target_session_attrs=read-write' },
      /^Invalid DATABASE_URL: ".*" is not a URL: the host list holds an IPv6 address/,
    ],
    [{ DATABASE_URL: 'postgres://u@a/db', DATABASE_DIRECT_URL: 'postgres://u@a,b/db' }, /^Invalid DATABASE_DIRECT_URL: it names 2 hosts/],
    [{ LIMITER_DATABASE_URL: 'postgres://u@a,b/db' }, /^Invalid LIMITER_DATABASE_URL: it names 2 hosts/],
    [
      { LIMITER_DATABASE_URL: 'postgres://u@a/db?target_session_attrs=read-only' },
      /^Invalid LIMITER_DATABASE_URL: target_session_attrs=read-only/,
    ],
  ] as const) {
    t.throws(() => parseConfig({ ...base, ...env }), { name: 'ConfigError', message }, JSON.stringify(env));
  }
  t.throws(
    () =>
      parseConfig({
        LIMITER_DATABASE_URL: `${PAIR},postgres://u@node3,10.0.0.2:5433,NODE1.example.com:5432/app%20db?target_session_attrs=primary`,
      }),
    /^Invalid LIMITER_DATABASE_URL: 10\.0\.0\.2:5433,node1\.example\.com:5432,node3:5432\/app db is named twice$/,
    'one HA pair named twice, its hosts in another order',
  );
});

t.test('DATABASE_READ_URL: a host list with any target_session_attrs', async (t) => {
  for (const attrs of ['standby', 'prefer-standby', 'read-only', 'any', 'primary']) {
    const url = `postgres://u@a:5432,b:5432/db?target_session_attrs=${attrs}`;
    t.equal(parseConfig({ DATABASE_URL: 'postgres://u@a/db', COLLECTIONS: 'demo', DATABASE_READ_URL: url }).databaseReadUrl, url, attrs);
  }
  const bare = 'postgres://u@a:5432,b:5432/db';
  t.equal(parseConfig({ DATABASE_URL: 'postgres://u@a/db', COLLECTIONS: 'demo', DATABASE_READ_URL: bare }).databaseReadUrl, bare, 'none');
});

t.test("LIMITER_SYNCHRONOUS_COMMIT: off by default, PostgreSQL's values, anything else stops start-up", async (t) => {
  t.equal(parseConfig({}).limiterSynchronousCommit, 'off');
  for (const value of ['off', 'local', 'remote_write', 'on', 'remote_apply']) {
    t.equal(parseConfig({ LIMITER_SYNCHRONOUS_COMMIT: value }).limiterSynchronousCommit, value, value);
  }
  for (const value of ['ON', 'true', '1', 'sync', 'remote-apply']) {
    t.throws(
      () => parseConfig({ LIMITER_SYNCHRONOUS_COMMIT: value }),
      new ConfigError(`Invalid LIMITER_SYNCHRONOUS_COMMIT: expected one of off, local, remote_write, on, remote_apply, got "${value}"`),
      value,
    );
  }
});
