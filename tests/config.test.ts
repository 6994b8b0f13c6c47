// Configuration: parsed once, frozen; every bad value is one clear message naming the variable.
import t from 'tap';
import { ConfigError, parseConfig } from '../lib/config.ts';

t.test('defaults', async (t) => {
  const config = parseConfig({});
  t.same(config, {
    port: 3000,
    databaseUrl: undefined,
    publicUrl: undefined,
    trustProxy: false,
    adminToken: undefined,
    cursorSecret: undefined,
    statementTimeoutMs: 5000,
    poolTimeoutMs: 2000,
  });
  t.ok(Object.isFrozen(config));
});

t.test('good values', async (t) => {
  const config = parseConfig({
    PORT: '8080',
    DATABASE_URL: 'postgres://u@h:5432/db',
    PUBLIC_URL: 'https://api.example.com/',
    TRUST_PROXY: 'true',
    ADMIN_TOKEN: 'a'.repeat(16),
    CURSOR_SECRET: 'b'.repeat(32),
  });
  t.equal(config.port, 8080);
  t.equal(config.publicUrl, 'https://api.example.com');
  t.equal(config.trustProxy, true);
  t.equal(parseConfig({ TRUST_PROXY: '0' }).trustProxy, false);
  t.equal(parseConfig({ STATEMENT_TIMEOUT_MS: '1500' }).statementTimeoutMs, 1500);
  t.equal(parseConfig({ POOL_TIMEOUT_MS: '250' }).poolTimeoutMs, 250);
});

t.test('bad values stop start-up with a message naming the variable', async (t) => {
  const bad: Record<string, string>[] = [
    { PORT: 'eighty' },
    { PORT: '70000' },
    { PORT: '-1' },
    { DATABASE_URL: 'not a url' },
    { DATABASE_URL: 'mysql://h/db' },
    { PUBLIC_URL: 'ftp://x' },
    { TRUST_PROXY: 'perhaps' },
    { ADMIN_TOKEN: 'short' },
    { CURSOR_SECRET: 'short' },
    { STATEMENT_TIMEOUT_MS: '5s' },
    { STATEMENT_TIMEOUT_MS: '0' },
    { POOL_TIMEOUT_MS: '-1' },
    { POOL_TIMEOUT_MS: '99' },
  ];
  for (const env of bad) {
    const name = Object.keys(env)[0]!;
    t.throws(() => parseConfig(env), ConfigError, name);
    try {
      parseConfig(env);
    } catch (error) {
      t.match((error as Error).message, new RegExp(`^Invalid ${name}: `), name);
    }
  }
});
