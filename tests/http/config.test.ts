// Configuration: parsed once, frozen; every bad value is one clear message naming the variable.
import t from 'tap';
import { ConfigError, parseConfig } from '../../lib/service/config.ts';

t.test('defaults', async (t) => {
  const config = parseConfig({});
  t.same(config, {
    port: 3000,
    databaseUrl: undefined,
    databaseDirectUrl: undefined,
    databaseReadUrl: undefined,
    limiterDatabaseUrls: undefined,
    publicUrl: undefined,
    trustProxy: { kind: 'none' },
    adminToken: undefined,
    cursorSecret: undefined,
    shutdownTimeoutMs: 10_000,
    statementTimeoutMs: 5000,
    poolTimeoutMs: 2000,
    databasePoolSize: 10,
    logLevel: 'info',
    shutdownDrainMs: 0,
    corsOrigins: '*',
    collections: { kind: 'demo' },
  });
  t.ok(Object.isFrozen(config));
});

t.test('COLLECTIONS: a file, or the demo; with DATABASE_URL it must be set', async (t) => {
  t.same(parseConfig({}).collections, { kind: 'demo' }, 'the embedded default serves the demo');
  t.same(parseConfig({ DATABASE_URL: 'postgres://u@h/db', COLLECTIONS: 'demo' }).collections, { kind: 'demo' });
  t.same(parseConfig({ DATABASE_URL: 'postgres://u@h/db', COLLECTIONS: 'collections.yaml' }).collections, {
    kind: 'file',
    path: 'collections.yaml',
  });
  t.same(parseConfig({ COLLECTIONS: 'team.json' }).collections, { kind: 'file', path: 'team.json' }, 'a file on the embedded default too');
  for (const unset of [{}, { COLLECTIONS: '' }]) {
    t.throws(
      () => parseConfig({ DATABASE_URL: 'postgres://u@h/db', ...unset }),
      {
        name: 'ConfigError',
        message:
          'COLLECTIONS is not set: name the tables to serve in a file (npm run --silent collections -- init > collections.yaml, then COLLECTIONS=collections.yaml; docs/reference/collections-file.md), or set COLLECTIONS=demo to serve the demo in this database',
      },
      'one line: how to write a file, or ask for the demo',
    );
  }
});

t.test('good values', async (t) => {
  const config = parseConfig({
    PORT: '8080',
    DATABASE_URL: 'postgres://u@h:5432/db',
    PUBLIC_URL: 'https://api.example.com/',
    TRUST_PROXY: '10.0.0.0/8, 2001:db8::1, loopback',
    ADMIN_TOKEN: 'a'.repeat(16),
    CURSOR_SECRET: 'b'.repeat(32),
    COLLECTIONS: 'demo',
  });
  t.equal(config.port, 8080);
  t.equal(config.publicUrl, 'https://api.example.com');
  t.same(config.trustProxy, { kind: 'addresses', addresses: ['10.0.0.0/8', '2001:db8::1', 'loopback'] });
  t.same(parseConfig({ TRUST_PROXY: '2' }).trustProxy, { kind: 'hops', hops: 2 });
  for (const off of ['0', 'false', 'off']) t.same(parseConfig({ TRUST_PROXY: off }).trustProxy, { kind: 'none' }, off);
  t.same(parseConfig({ TRUST_PROXY: '192.0.2.0/255.255.255.0' }).trustProxy.kind, 'addresses', 'a netmask');
  t.equal(parseConfig({ STATEMENT_TIMEOUT_MS: '1500' }).statementTimeoutMs, 1500);
  t.equal(parseConfig({ POOL_TIMEOUT_MS: '250' }).poolTimeoutMs, 250);
  t.equal(parseConfig({ LOG_LEVEL: 'SILENT' }).logLevel, 'silent', 'a level in any case');
  t.equal(parseConfig({ LOG_LEVEL: 'debug' }).logLevel, 'debug');
  t.equal(parseConfig({ SHUTDOWN_DRAIN_MS: '3000' }).shutdownDrainMs, 3000);
  for (const size of [1, 4, 100]) t.equal(parseConfig({ DATABASE_POOL_SIZE: String(size) }).databasePoolSize, size, `pool of ${size}`);
  const split = parseConfig({
    COLLECTIONS: 'demo',
    DATABASE_URL: 'postgres://u@pooler:6432/db?prepare=false',
    DATABASE_DIRECT_URL: 'postgres://u@primary:5432/db',
    DATABASE_READ_URL: 'postgresql://u@replica:5432/db',
  });
  t.equal(split.databaseDirectUrl, 'postgres://u@primary:5432/db');
  t.equal(split.databaseReadUrl, 'postgresql://u@replica:5432/db');
  t.same(parseConfig({ LIMITER_DATABASE_URL: 'postgres://u@limiter/db' }).limiterDatabaseUrls, ['postgres://u@limiter/db']);
  t.same(
    parseConfig({ LIMITER_DATABASE_URL: 'postgres://u@a:5432/db, postgres://u@a:5433/db,postgresql://u@a:5432/other' }).limiterDatabaseUrls,
    ['postgres://u@a:5432/db', 'postgres://u@a:5433/db', 'postgresql://u@a:5432/other'],
    'a comma list, each naming another database',
  );
  t.same(parseConfig({ CORS_ORIGINS: 'https://app.example.com, http://localhost:5173' }).corsOrigins, [
    'https://app.example.com',
    'http://localhost:5173',
  ]);
  t.equal(parseConfig({ CORS_ORIGINS: '*' }).corsOrigins, '*');
});

t.test('bad values stop start-up with a message naming the variable', async (t) => {
  const bad: Record<string, string>[] = [
    { PORT: 'eighty' },
    { PORT: '70000' },
    { PORT: '-1' },
    { DATABASE_URL: 'not a url' },
    { DATABASE_URL: 'mysql://h/db' },
    { DATABASE_DIRECT_URL: 'postgres://u@h/db' }, // without DATABASE_URL
    { DATABASE_READ_URL: 'postgres://u@h/db' },
    { PUBLIC_URL: 'ftp://x' },
    { TRUST_PROXY: 'perhaps' },
    { TRUST_PROXY: '10.0.0.0/33' },
    { TRUST_PROXY: '10.0.0.1,,10.0.0.2' },
    { TRUST_PROXY: '17' },
    { ADMIN_TOKEN: 'short' },
    { CURSOR_SECRET: 'short' },
    { SHUTDOWN_TIMEOUT_MS: '10s' },
    { SHUTDOWN_TIMEOUT_MS: '600001' },
    { STATEMENT_TIMEOUT_MS: '5s' },
    { STATEMENT_TIMEOUT_MS: '0' },
    { POOL_TIMEOUT_MS: '-1' },
    { CORS_ORIGINS: 'https://app.example.com/' },
    { CORS_ORIGINS: 'app.example.com' },
    { CORS_ORIGINS: 'https://a.example,,https://b.example' },
    { CORS_ORIGINS: 'ftp://files.example' },
    { POOL_TIMEOUT_MS: '99' },
    { DATABASE_POOL_SIZE: '0' },
    { DATABASE_POOL_SIZE: '101' },
    { DATABASE_POOL_SIZE: 'ten' },
    { DATABASE_POOL_SIZE: '2.5' },
    { DATABASE_POOL_SIZE: '-3' },
    { LOG_LEVEL: 'verbose' },
    { LOG_LEVEL: '30' },
    { SHUTDOWN_DRAIN_MS: '5s' },
    { SHUTDOWN_DRAIN_MS: '600001' },
    { LIMITER_DATABASE_URL: 'mysql://h/db' },
    { LIMITER_DATABASE_URL: 'postgres://u@a/db,' },
    { LIMITER_DATABASE_URL: 'postgres://u@a/db,not a url' },
    { LIMITER_DATABASE_URL: Array.from({ length: 17 }, (_, i) => `postgres://u@a/db${i}`).join(',') },
  ];
  for (const env of bad) {
    const name = Object.keys(env)[0]!;
    t.throws(() => parseConfig(env), ConfigError, name);
    if (name.startsWith('DATABASE_') && name !== 'DATABASE_POOL_SIZE' && name !== 'DATABASE_URL') {
      // Beside a good DATABASE_URL, a URL that is not one is refused too.
      t.throws(
        () => parseConfig({ DATABASE_URL: 'postgres://u@h/db', COLLECTIONS: 'demo', [name]: 'mysql://h/db' }),
        new RegExp(`^Invalid ${name}: expected`),
        name,
      );
    }
    try {
      parseConfig(env);
    } catch (error) {
      t.match((error as Error).message, new RegExp(`^Invalid ${name}: `), name);
    }
  }
});

t.test('LIMITER_DATABASE_URL names each database once, whatever the spelling', async (t) => {
  for (const [a, b] of [
    ['postgres://u@a/db', 'postgres://other:secret@A:5432/db'],
    ['postgres://u@a:5432/db?sslmode=disable', 'postgresql://u@a/db'],
  ] as const) {
    t.throws(
      () => parseConfig({ LIMITER_DATABASE_URL: `${a},${b}` }),
      /^Invalid LIMITER_DATABASE_URL: a:5432\/db is named twice$/,
      `${a} and ${b}`,
    );
  }
});

t.test('TRUST_PROXY=true is refused: it would trust X-Forwarded-For from anyone; the message shows the forms', async (t) => {
  for (const value of ['true', 'TRUE', 'yes', 'on']) {
    t.throws(
      () => parseConfig({ TRUST_PROXY: value }),
      {
        name: 'ConfigError',
        message:
          /^Invalid TRUST_PROXY: .* would trust X-Forwarded-For from any client; name your proxies with a hop count .* or a comma list of proxy addresses and CIDRs/,
      },
      value,
    );
  }
});
