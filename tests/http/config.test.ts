// Configuration: parsed once, frozen; every bad value is one clear message naming the variable.
import { generateKeyPairSync, type RSAKeyPairKeyObjectOptions } from 'node:crypto';
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
    limiterSynchronousCommit: 'off',
    publicUrl: undefined,
    trustProxy: { kind: 'none' },
    adminToken: undefined,
    cursorSecret: undefined,
    shutdownTimeoutMs: 10_000,
    statementTimeoutMs: 5000,
    poolTimeoutMs: 2000,
    databasePoolSize: 10,
    logLevel: 'info',
    limiterHoldMs: 50,
    shutdownDrainMs: 0,
    corsOrigins: '*',
    collections: { kind: 'demo' },
    tokens: undefined,
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

/** A public key of `type` as PEM (SPKI, unless `format` says otherwise). */
function publicPem(type: 'rsa' | 'ec' | 'ed25519' | 'dsa', options: Record<string, unknown> = {}, format = 'spki'): string {
  // One call for every type: the options are each type's own (modulusLength, namedCurve).
  const { publicKey } = generateKeyPairSync(type as 'rsa', { modulusLength: 2048, ...options } as RSAKeyPairKeyObjectOptions);
  return publicKey.export({ type: format as 'spki', format: 'pem' }) as string;
}

t.test('JWT_*: one source of keys, and the settings around it', async (t) => {
  t.equal(parseConfig({}).tokens, undefined, 'no tokens without a key source');
  const secret = 's'.repeat(32);
  const withSecret = parseConfig({ JWT_SECRET: secret });
  t.same(withSecret.tokens, { secret, tierClaim: 'tier', defaultTier: 'free' }, 'the defaults: claim tier, tier free');
  t.ok(Object.isFrozen(withSecret.tokens));
  const rsa = publicPem('rsa');
  t.same(
    parseConfig({
      JWT_PUBLIC_KEY: rsa,
      JWT_ISSUER: 'https://id.example.com/',
      JWT_AUDIENCE: 'api',
      JWT_TIER_CLAIM: 'https://example.com/plan',
      JWT_DEFAULT_TIER: 'pro',
    }).tokens,
    { publicKey: rsa, issuer: 'https://id.example.com/', audience: 'api', tierClaim: 'https://example.com/plan', defaultTier: 'pro' },
  );
  t.equal(parseConfig({ JWT_PUBLIC_KEY: rsa.replace(/\n/g, '\\n') }).tokens?.publicKey, rsa, 'a PEM on one line, with \\n escapes');
  t.equal(
    parseConfig({ JWT_PUBLIC_KEY: publicPem('rsa', {}, 'pkcs1') }).tokens?.publicKey?.split('\n')[0],
    '-----BEGIN RSA PUBLIC KEY-----',
  );
  for (const namedCurve of ['P-256', 'P-384', 'P-521']) {
    t.not(parseConfig({ JWT_PUBLIC_KEY: publicPem('ec', { namedCurve }) }).tokens, undefined, namedCurve);
  }
  t.not(parseConfig({ JWT_PUBLIC_KEY: publicPem('ed25519') }).tokens, undefined, 'Ed25519');
  t.same(parseConfig({ JWT_JWKS_URL: 'https://id.example.com/.well-known/jwks.json' }).tokens, {
    jwksUrl: 'https://id.example.com/.well-known/jwks.json',
    tierClaim: 'tier',
    defaultTier: 'free',
  });
  t.equal(parseConfig({ JWT_JWKS_URL: 'http://127.0.0.1:8080/jwks' }).tokens?.jwksUrl, 'http://127.0.0.1:8080/jwks', 'http too');
});

t.test('JWT_*: bad values stop start-up with one line naming the variable', async (t) => {
  const secret = 's'.repeat(32);
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const bad: [Record<string, string>, string, RegExp][] = [
    [{ JWT_SECRET: 's'.repeat(31) }, 'JWT_SECRET', /must be at least 32 characters long$/],
    [
      { JWT_SECRET: secret, JWT_PUBLIC_KEY: publicPem('rsa') },
      'JWT_PUBLIC_KEY',
      /JWT_SECRET is set too; set only one of JWT_SECRET, JWT_PUBLIC_KEY, JWT_JWKS_URL$/,
    ],
    [{ JWT_PUBLIC_KEY: publicPem('rsa'), JWT_JWKS_URL: 'https://id.example.com/jwks' }, 'JWT_JWKS_URL', /JWT_PUBLIC_KEY is set too/],
    [{ JWT_SECRET: secret, JWT_JWKS_URL: 'https://id.example.com/jwks' }, 'JWT_JWKS_URL', /JWT_SECRET is set too/],
    [{ JWT_PUBLIC_KEY: 'not a key' }, 'JWT_PUBLIC_KEY', /expected a PEM public key \(-----BEGIN PUBLIC KEY-----\)$/],
    [{ JWT_PUBLIC_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string }, 'JWT_PUBLIC_KEY', /expected a PEM public key/],
    [
      { JWT_PUBLIC_KEY: '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----' },
      'JWT_PUBLIC_KEY',
      /is not a public key that can be read$/,
    ],
    [{ JWT_PUBLIC_KEY: publicPem('rsa', { modulusLength: 1024 }) }, 'JWT_PUBLIC_KEY', /at least 2048 bits, this one has 1024$/],
    [{ JWT_PUBLIC_KEY: publicPem('ec', { namedCurve: 'secp256k1' }) }, 'JWT_PUBLIC_KEY', /expected an RSA \(RS256\), EC P-256 \(ES256\)/],
    [{ JWT_PUBLIC_KEY: publicPem('dsa', { modulusLength: 2048, divisorLength: 256 }) }, 'JWT_PUBLIC_KEY', /expected an RSA/],
    [{ JWT_JWKS_URL: 'id.example.com/jwks' }, 'JWT_JWKS_URL', /is not a URL$/],
    [{ JWT_JWKS_URL: 'ftp://id.example.com/jwks' }, 'JWT_JWKS_URL', /expected a https: or http: URL/],
    [{ JWT_SECRET: secret, JWT_TIER_CLAIM: 'my tier' }, 'JWT_TIER_CLAIM', /printable characters without spaces, got "my tier"$/],
    [{ JWT_SECRET: secret, JWT_DEFAULT_TIER: 'Pro' }, 'JWT_DEFAULT_TIER', /expected a tier name .*, got "Pro"$/],
    [{ JWT_ISSUER: 'https://id.example.com/' }, 'JWT_ISSUER', /it needs one of JWT_SECRET, JWT_PUBLIC_KEY, JWT_JWKS_URL/],
    [{ JWT_AUDIENCE: 'api' }, 'JWT_AUDIENCE', /it needs one of/],
    [{ JWT_TIER_CLAIM: 'plan' }, 'JWT_TIER_CLAIM', /it needs one of/],
    [{ JWT_DEFAULT_TIER: 'pro' }, 'JWT_DEFAULT_TIER', /it needs one of/],
  ];
  for (const [env, name, reason] of bad) {
    t.throws(() => parseConfig(env), { name: 'ConfigError', message: new RegExp(`^Invalid ${name}: `) }, name);
    t.throws(() => parseConfig(env), { message: reason }, `${name}: ${reason}`);
  }
});
