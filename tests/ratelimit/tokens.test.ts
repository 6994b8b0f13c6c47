// Bearer JWTs verified with jose: secrets, public keys and a live JSON Web Key Set; every failure a 401 invalid_token
// (or a 503 when the key set cannot be fetched), never anything else; a verified token remembered until it expires.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { type CryptoKey, exportJWK, exportSPKI, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';
import t, { type Test } from 'tap';
import { ApiError } from '../../lib/http/errors.ts';
import { looksLikeJwt, type TokenClient, type TokenSettings, tokenVerifier } from '../../lib/ratelimit/tokens.ts';

const SECRET = 'a shared secret of more than 32 characters';
const ISSUER = 'https://id.example.com/';
const base = { tierClaim: 'tier', defaultTier: 'free' } as const;

/** A clock the test moves; seconds for claims, milliseconds for the verifier. */
function clock() {
  const state = { ms: Date.now() };
  return { now: () => state.ms, seconds: () => Math.floor(state.ms / 1000), advance: (ms: number) => (state.ms += ms) };
}

async function sign(claims: JWTPayload, key: CryptoKey | Uint8Array, header: { alg: string; kid?: string }): Promise<string> {
  return new SignJWT(claims).setProtectedHeader(header).sign(key);
}

const hs = (claims: JWTPayload, secret = SECRET) => sign(claims, new TextEncoder().encode(secret), { alg: 'HS256' });

/** What a verification that must fail threw: an ApiError, whatever it is. */
async function refusal(verification: () => TokenClient | Promise<TokenClient>): Promise<ApiError> {
  try {
    await verification();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('verified, though it should not have been');
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

t.test('HS256: the client is its issuer and subject; tier and collections from its claims', async (t) => {
  const time = clock();
  const verifier = tokenVerifier({ ...base, secret: SECRET }, { now: time.now });
  const exp = time.seconds() + 600;
  const client = await verifier.verify(
    await hs({ iss: ISSUER, sub: 'user-1', exp, tier: 'pro', collections: ['orders', 'invoices'], org: { id: 7 } }),
  );
  t.same(client, {
    subject: `jwt:${ISSUER} user-1`,
    tier: 'pro',
    collections: ['orders', 'invoices'],
    claims: { iss: ISSUER, sub: 'user-1', exp, tier: 'pro', collections: ['orders', 'invoices'], org: { id: 7 } },
  });
  t.ok(Object.isFrozen(client.claims) && Object.isFrozen(client.claims.org) && Object.isFrozen(client.collections), 'frozen: it is shared');

  const plain = await verifier.verify(await hs({ sub: 'user-2' }));
  t.equal(plain.subject, 'jwt: user-2', 'no iss: the subject alone');
  t.equal(plain.tier, 'free', 'no tier claim: the default tier');
  t.equal(plain.collections, undefined, 'no collections claim: every collection');
  t.equal((await verifier.verify(await hs({ sub: 'u', tier: 3 }))).tier, 'free', 'a tier claim that is not a string: the default');

  const custom = tokenVerifier({ secret: SECRET, tierClaim: 'https://example.com/plan', defaultTier: 'basic' }, { now: time.now });
  t.equal((await custom.verify(await hs({ sub: 'u', 'https://example.com/plan': 'team', tier: 'pro' }))).tier, 'team', 'JWT_TIER_CLAIM');
  t.equal((await custom.verify(await hs({ sub: 'u', tier: 'pro' }))).tier, 'basic', 'JWT_DEFAULT_TIER');

  const wrong = await refusal(async () => verifier.verify(await hs({ sub: 'user-1' }, 'another secret of more than 32 characters')));
  t.match(wrong, { code: 'invalid_token', status: 401, detail: 'Invalid token: its signature does not match' });
  const token = await hs({ sub: 'user-1', tier: 'free' });
  const [header, , signature] = token.split('.');
  const tampered = `${header}.${b64({ sub: 'user-1', tier: 'pro' })}.${signature}`;
  t.match(await refusal(() => verifier.verify(tampered)), { code: 'invalid_token', detail: 'Invalid token: its signature does not match' });
});

t.test('RS256, ES256, EdDSA from a PEM: the key type names the one algorithm; HS256 with the PEM as secret is refused', async (t) => {
  for (const alg of ['RS256', 'ES256', 'EdDSA']) {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
    const pem = await exportSPKI(publicKey);
    const verifier = tokenVerifier({ ...base, publicKey: pem });
    t.equal((await verifier.verify(await sign({ sub: 'user-1' }, privateKey, { alg }))).subject, 'jwt: user-1', alg);

    const other = await generateKeyPair(alg);
    t.match(await refusal(async () => verifier.verify(await sign({ sub: 'user-1' }, other.privateKey, { alg }))), {
      code: 'invalid_token',
      detail: 'Invalid token: its signature does not match',
    });
    // Algorithm confusion: the public key's PEM is public, so an HMAC keyed with its text proves nothing.
    const confused = await sign({ sub: 'admin' }, new TextEncoder().encode(pem), { alg: 'HS256' });
    t.match(await refusal(() => verifier.verify(confused)), {
      code: 'invalid_token',
      detail: new RegExp(`^Invalid token: its algorithm "HS256" is not accepted; expected ${alg}`),
    });
  }
  const rsa = await generateKeyPair('RS256');
  const verifier = tokenVerifier({ ...base, publicKey: await exportSPKI(rsa.publicKey) });
  const ps = await generateKeyPair('PS256');
  t.match(await refusal(async () => verifier.verify(await sign({ sub: 'u' }, ps.privateKey, { alg: 'PS256' }))), {
    detail: 'Invalid token: its algorithm "PS256" is not accepted; expected RS256',
  });
});

t.test('alg none is refused, with a secret, a public key or a key set', async (t) => {
  const rsa = await generateKeyPair('RS256');
  const verifiers = {
    secret: tokenVerifier({ ...base, secret: SECRET }),
    'public key': tokenVerifier({ ...base, publicKey: await exportSPKI(rsa.publicKey) }),
    // Never fetched: the algorithm is refused before a key is looked for.
    'key set': tokenVerifier({ ...base, jwksUrl: 'http://127.0.0.1:9/jwks' }),
  };
  for (const [name, verifier] of Object.entries(verifiers)) {
    for (const alg of ['none', 'None', 'NONE']) {
      const unsigned = `${b64({ alg, typ: 'JWT' })}.${b64({ sub: 'admin', tier: 'pro' })}.`;
      t.ok(looksLikeJwt(unsigned), 'an unsigned token still looks like one, so that it is refused as a token');
      const error = await refusal(() => verifier.verify(unsigned));
      t.match(
        error,
        { code: 'invalid_token', status: 401, detail: new RegExp(`^Invalid token: its algorithm "${alg}" is not accepted`) },
        `${name}: ${alg}`,
      );
      t.match(await refusal(() => verifier.verify(`${unsigned}c2ln`)), { code: 'invalid_token' }, `${name}: ${alg} with a signature`);
    }
  }
});

t.test('exp and nbf with 30 s of skew', async (t) => {
  const time = clock();
  const verifier = tokenVerifier({ ...base, secret: SECRET }, { now: time.now });
  const now = time.seconds();
  const expired = await refusal(async () => verifier.verify(await hs({ sub: 'u', exp: now - 31 })));
  t.match(expired, {
    code: 'invalid_token',
    status: 401,
    detail: `Invalid token: it expired at ${new Date((now - 31) * 1000).toISOString()}`,
  });
  t.equal((await verifier.verify(await hs({ sub: 'u', exp: now - 25 }))).subject, 'jwt: u', 'expired 25 s ago: within the skew');
  const early = await refusal(async () => verifier.verify(await hs({ sub: 'u', nbf: now + 60 })));
  t.match(early, { code: 'invalid_token', detail: `Invalid token: it is not valid before ${new Date((now + 60) * 1000).toISOString()}` });
  t.equal((await verifier.verify(await hs({ sub: 'u', nbf: now + 25 }))).subject, 'jwt: u', 'valid in 25 s: within the skew');
  for (const claim of ['exp', 'nbf', 'iat']) {
    t.match(await refusal(async () => verifier.verify(await hs({ sub: 'u', [claim]: 'tomorrow' }))), {
      code: 'invalid_token',
      detail: `Invalid token: its claim ${claim} must be a number of seconds since the epoch`,
    });
  }
  t.match(await refusal(async () => verifier.verify(await hs({ sub: 'u', exp: -1e300 }))), {
    detail: 'Invalid token: it expired at -1e+300',
  });
});

t.test('iss and aud when they are set', async (t) => {
  const verifier = tokenVerifier({ ...base, secret: SECRET, issuer: ISSUER, audience: 'orders-api' });
  t.equal((await verifier.verify(await hs({ iss: ISSUER, aud: 'orders-api', sub: 'u' }))).subject, `jwt:${ISSUER} u`);
  t.equal(
    (await verifier.verify(await hs({ iss: ISSUER, aud: ['billing', 'orders-api'], sub: 'u' }))).subject,
    `jwt:${ISSUER} u`,
    'aud: one of several',
  );
  const cases: [JWTPayload, string][] = [
    [{ iss: 'https://evil.example.com/', aud: 'orders-api', sub: 'u' }, `its issuer (iss) must be "${ISSUER}"`],
    [{ aud: 'orders-api', sub: 'u' }, 'it has no claim iss'],
    [{ iss: ISSUER, aud: 'billing', sub: 'u' }, 'its audience (aud) must include "orders-api"'],
    [{ iss: ISSUER, aud: ['billing'], sub: 'u' }, 'its audience (aud) must include "orders-api"'],
    [{ iss: ISSUER, sub: 'u' }, 'it has no claim aud'],
  ];
  for (const [claims, reason] of cases) {
    t.match(
      await refusal(async () => verifier.verify(await hs(claims))),
      { code: 'invalid_token', detail: `Invalid token: ${reason}` },
      reason,
    );
  }
});

t.test('sub, iss and collections must be what they say', async (t) => {
  const verifier = tokenVerifier({ ...base, secret: SECRET });
  const cases: [JWTPayload, string][] = [
    [{}, 'it has no subject (sub)'],
    [{ sub: '' }, 'it has no subject (sub)'],
    [{ sub: 42 as unknown as string }, 'it has no subject (sub)'],
    [{ sub: 'u', iss: 7 as unknown as string }, 'its issuer (iss) is not a string'],
    [{ sub: 'u', collections: 'orders' }, 'its claim collections must be an array of collection names'],
    [{ sub: 'u', collections: ['orders', 3] }, 'its claim collections must be an array of collection names'],
    [{ sub: 'u', collections: { orders: true } }, 'its claim collections must be an array of collection names'],
    [{ sub: 'u', collections: null }, 'its claim collections must be an array of collection names'],
  ];
  for (const [claims, reason] of cases) {
    t.match(
      await refusal(async () => verifier.verify(await hs(claims))),
      { code: 'invalid_token', detail: `Invalid token: ${reason}` },
      JSON.stringify(claims),
    );
  }
  t.same((await verifier.verify(await hs({ sub: 'u', collections: [] }))).collections, [], 'an empty list: no collection');
});

t.test('subjects: bounded, and one per issuer and subject', async (t) => {
  const verifier = tokenVerifier({ ...base, secret: SECRET });
  const subject = async (claims: JWTPayload) => (await verifier.verify(await hs(claims))).subject;
  t.equal(await subject({ iss: ISSUER, sub: 'a b' }), `jwt:${ISSUER} a b`, 'a space in sub is unambiguous: it comes last');
  const digested = [
    await subject({ iss: ISSUER, sub: 'x'.repeat(500) }),
    await subject({ iss: 'a b', sub: 'c' }),
    await subject({ iss: ISSUER, sub: 'user\u0000' }),
    await subject({ iss: ISSUER, sub: 'user\ud800' }),
    await subject({ iss: ISSUER, sub: 'user\udc00' }),
  ];
  for (const value of digested) t.match(value, /^jwt:#[A-Za-z0-9_-]{43}$/, 'long, ambiguous or not plain text: a digest');
  t.equal(new Set(digested).size, digested.length, 'each its own');
  t.equal(await subject({ iss: 'a', sub: 'b c' }), 'jwt:a b c', 'not the subject of iss "a b" and sub "c"');
  t.equal(await subject({ iss: ISSUER, sub: 'x'.repeat(500) }), digested[0], 'the same client, the same subject');
});

t.test('no token text gets anything but a 401 invalid_token', async (t) => {
  const verifier = tokenVerifier({ ...base, secret: SECRET });
  const valid = await hs({ sub: 'u' });
  const [header, payload] = valid.split('.');
  const texts = [
    '',
    'x',
    'a.b',
    'a.b.c',
    '..',
    'a.b.c.d',
    `${valid}.`,
    `${b64('a string')}.${payload}.sig`,
    `${b64({ alg: 'HS256', crit: ['exp'] })}.${payload}.sig`,
    `${b64({ alg: 'HS256', b64: false, crit: ['b64'] })}.${payload}.sig`,
    `${b64({ alg: 7 })}.${payload}.sig`,
    `${header}.${b64([1, 2])}.sig`,
    `${header}.${Buffer.from('{"sub":"u"').toString('base64url')}.sig`,
    `${header}.${payload}.!!!`,
    `${b64({ alg: 'RS256' })}.${payload}.sig`,
    `${b64({ alg: 'HS512' })}.${payload}.sig`,
  ];
  for (const text of texts)
    t.match(await refusal(() => verifier.verify(text)), { code: 'invalid_token', status: 401 }, JSON.stringify(text));
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        fc.string(),
        fc.tuple(fc.string(), fc.string(), fc.string()).map((parts) => parts.join('.')),
        fc.tuple(fc.jsonValue(), fc.jsonValue(), fc.string()).map(([h, p, s]) => `${b64(h)}.${b64(p)}.${s}`),
        fc.tuple(fc.dictionary(fc.string(), fc.jsonValue()), fc.string()).map(([h, s]) => `${b64({ ...h, alg: 'HS256' })}.${payload}.${s}`),
      ),
      async (text) => {
        const error = await refusal(() => verifier.verify(text));
        return error.code === 'invalid_token' && error.status === 401;
      },
    ),
    { numRuns: 300 },
  );
});

t.test('looksLikeJwt: three base64url segments', async (t) => {
  t.equal(looksLikeJwt(await hs({ sub: 'u' })), true);
  t.equal(looksLikeJwt('eyJh.eyJz.'), true, 'an empty signature (alg none) still looks like a JWT');
  for (const text of ['pck_abcdefghijklmnopqrstuvwxyz012345', '', 'a.b', 'a..c', '.b.c', 'a.b.c.d', 'a b.c.d', 'a.b.c=', 'a+b.c.d']) {
    t.equal(looksLikeJwt(text), false, JSON.stringify(text));
  }
});

t.test('a verified token is remembered until its exp, and never past it', async (t) => {
  const time = clock();
  const verifier = tokenVerifier({ ...base, secret: SECRET }, { now: time.now });
  const token = await hs({ sub: 'u', exp: time.seconds() + 120 });
  const first = verifier.verify(token);
  t.ok(first instanceof Promise, 'the first time: verified');
  const client = await first;
  const second = verifier.verify(token);
  t.equal(second, client, 'the second time: the same client, at once, without a verification');
  const other = await hs({ sub: 'v' });
  const [a, b] = [verifier.verify(other), verifier.verify(other)];
  t.ok(a instanceof Promise);
  t.equal(a, b, 'the same token twice at once: one verification');
  await a;

  time.advance(119_000);
  t.equal(verifier.verify(token), client, 'still remembered a second before exp');
  time.advance(1000);
  const past = verifier.verify(token);
  t.ok(past instanceof Promise, 'at exp: verified again');
  t.equal((await past).subject, 'jwt: u', 'and valid, within the skew');
  const again = verifier.verify(token);
  t.ok(again instanceof Promise, 'but no longer remembered');
  await again;
  time.advance(30_000);
  t.match(await refusal(() => verifier.verify(token)), { code: 'invalid_token', detail: /^Invalid token: it expired at / }, 'then refused');

  const forever = await hs({ sub: 'w' });
  await verifier.verify(forever);
  time.advance(299_000);
  t.notOk(verifier.verify(forever) instanceof Promise, 'no exp: remembered for a while');
  time.advance(1000);
  t.ok(verifier.verify(forever) instanceof Promise, 'then verified again, five minutes after it was');

  const late = await hs({ sub: 'x', exp: time.seconds() - 10 });
  await verifier.verify(late);
  t.ok(verifier.verify(late) instanceof Promise, 'a token already past exp (within the skew) is never remembered');
  const bad = await hs({ sub: 'x' }, 'another secret of more than 32 characters');
  await refusal(() => verifier.verify(bad));
  t.match(await refusal(() => verifier.verify(bad)), { code: 'invalid_token' }, 'nor is a refusal');
});

t.test('the cache holds 10,000 tokens, forgetting the one used longest ago', async (t) => {
  const verifier = tokenVerifier({ ...base, secret: SECRET });
  const key = new TextEncoder().encode(SECRET);
  const tokens = await Promise.all(Array.from({ length: 10_001 }, (_, i) => sign({ sub: `u${i}` }, key, { alg: 'HS256' })));
  for (const token of tokens.slice(0, 10_000)) await verifier.verify(token);
  t.notOk(verifier.verify(tokens[0]!) instanceof Promise, 'the first, used again: now the latest used');
  await verifier.verify(tokens[10_000]!);
  t.notOk(verifier.verify(tokens[0]!) instanceof Promise, 'the first: kept');
  t.ok(verifier.verify(tokens[1]!) instanceof Promise, 'the second, used longest ago: forgotten');
  t.notOk(verifier.verify(tokens[10_000]!) instanceof Promise, 'the last: kept');
});

/** A JSON Web Key Set served over HTTP, whose keys a test changes, counting the fetches. */
async function keySetServer(t: Test) {
  const state = { keys: [] as JWK[], requests: 0, status: 200, body: undefined as string | undefined };
  const server: Server = createServer((_request, response) => {
    state.requests++;
    response.writeHead(state.status, { 'content-type': 'application/json' });
    response.end(state.body ?? JSON.stringify({ keys: state.keys }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const stop = async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  };
  const start = async () => {
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
  };
  t.teardown(() => (server.listening ? stop() : undefined));
  return { state, url: `http://127.0.0.1:${port}/.well-known/jwks.json`, stop, start };
}

/** A signing key with its public JWK, named `kid`. */
async function signingKey(kid: string, alg = 'RS256') {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, jwk, sign: (claims: JWTPayload) => sign(claims, privateKey, { alg, kid }) };
}

t.test('a key set that rotates: a new kid is fetched once; unknown kids fetch at most once in 30 s', async (t) => {
  const server = await keySetServer(t);
  const [k1, k2, k3] = await Promise.all([signingKey('k1'), signingKey('k2'), signingKey('k3', 'ES256')]);
  server.state.keys = [k1.jwk];
  // A set fetched 31 s ago, past its cooldown: as a long-running instance holds it.
  const verifier = tokenVerifier({ ...base, jwksUrl: server.url }, { jwksCache: { uat: Date.now() - 31_000, jwks: { keys: [k1.jwk] } } });
  t.equal((await verifier.verify(await k1.sign({ sub: 'u1' }))).subject, 'jwt: u1', 'k1, from the set held');
  t.equal(server.state.requests, 0, 'no fetch');

  server.state.keys = [k2.jwk]; // the provider rotates: k2 signs, k1 is gone
  t.equal((await verifier.verify(await k2.sign({ sub: 'u2' }))).subject, 'jwt: u2', 'k2: the set fetched again');
  t.equal(server.state.requests, 1, 'one fetch');

  const stranger = await signingKey('?', 'ES256');
  const burst = await Promise.all(
    Array.from({ length: 20 }, async (_, i) =>
      refusal(async () =>
        verifier.verify(await sign({ sub: `s${i}` }, (await generateKeyPair('ES256')).privateKey, { alg: 'ES256', kid: `unknown-${i}` })),
      ),
    ),
  );
  for (const error of burst)
    t.match(error, {
      code: 'invalid_token',
      status: 401,
      detail: /^Invalid token: no key of the key set matches it \(kid "unknown-\d+"\)$/,
    });
  for (let i = 0; i < 5; i++) await refusal(async () => verifier.verify(await stranger.sign({ sub: `t${i}` })));
  t.equal(server.state.requests, 1, 'twenty-five tokens with unknown kids within 30 s: no fetch');

  server.state.keys = [k2.jwk, k3.jwk];
  t.match(
    await refusal(async () => verifier.verify(await k3.sign({ sub: 'u3' }))),
    { code: 'invalid_token' },
    'k3, published within the cooldown: not yet',
  );
  t.match(await refusal(async () => verifier.verify(await k1.sign({ sub: 'u5' }))), { code: 'invalid_token' }, 'k1, retired: refused');
  t.equal(server.state.requests, 1, 'still the one fetch');
  t.equal((await verifier.verify(await k2.sign({ sub: 'u4' }))).subject, 'jwt: u4', 'k2 keeps verifying');
});

t.test('a fresh verifier: one fetch for a burst of tokens, known kids and unknown', async (t) => {
  const server = await keySetServer(t);
  const [k1, k2] = await Promise.all([signingKey('k1'), signingKey('k2')]);
  server.state.keys = [k1.jwk];
  const verifier = tokenVerifier({ ...base, jwksUrl: server.url });
  const known = await Promise.all(Array.from({ length: 10 }, async (_, i) => verifier.verify(await k1.sign({ sub: `u${i}` }))));
  t.same(
    known.map((client) => client.subject),
    Array.from({ length: 10 }, (_, i) => `jwt: u${i}`),
  );
  const unknown = await Promise.all(
    Array.from({ length: 10 }, async (_, i) => refusal(async () => verifier.verify(await k2.sign({ sub: `v${i}` })))),
  );
  for (const error of unknown) t.equal(error.code, 'invalid_token');
  t.equal(server.state.requests, 1);

  // Not even a fetch for what no key set could verify.
  t.match(await refusal(async () => verifier.verify(await hs({ sub: 'u' }))), {
    detail: /^Invalid token: its algorithm "HS256" is not accepted; expected RS256 or /,
  });
  t.equal(server.state.requests, 1);
});

t.test('several keys that could verify a token without kid: the token must name its key', async (t) => {
  const server = await keySetServer(t);
  const [k1, k2] = await Promise.all([signingKey('k1'), signingKey('k2')]);
  server.state.keys = [
    { ...k1.jwk, kid: undefined },
    { ...k2.jwk, kid: undefined },
  ];
  const { privateKey } = await generateKeyPair('RS256');
  const verifier = tokenVerifier({ ...base, jwksUrl: server.url });
  t.match(await refusal(async () => verifier.verify(await sign({ sub: 'u' }, privateKey, { alg: 'RS256' }))), {
    code: 'invalid_token',
    detail: 'Invalid token: it names no key (kid) and several keys of the key set could verify it',
  });
});

t.test('a key set that cannot be fetched: 503 with Retry-After, then verified once it is back', async (t) => {
  const server = await keySetServer(t);
  const k1 = await signingKey('k1');
  server.state.keys = [k1.jwk];
  await server.stop();
  const time = clock();
  const verifier = tokenVerifier({ ...base, jwksUrl: server.url }, { now: time.now });
  const token = await k1.sign({ sub: 'u' });
  const down = await refusal(() => verifier.verify(token));
  t.match(down, {
    code: 'unavailable',
    status: 503,
    detail: 'The key set of JWT_JWKS_URL cannot be fetched, so tokens cannot be verified',
  });
  t.same(down.options.headers, { 'retry-after': '5' });

  await server.start();
  t.match(await refusal(() => verifier.verify(token)), { code: 'unavailable', options: { headers: { 'retry-after': '5' } } });
  t.equal(server.state.requests, 0, 'within the pause after a failed fetch: not fetched again');
  time.advance(3000);
  t.match(await refusal(() => verifier.verify(token)), { code: 'unavailable', options: { headers: { 'retry-after': '2' } } });
  time.advance(2000);
  t.equal((await verifier.verify(token)).subject, 'jwt: u', 'back: verified');
  t.equal(server.state.requests, 1);
});

t.test('a key set that cannot be fetched: the set held keeps verifying its own keys', async (t) => {
  const server = await keySetServer(t);
  const [k1, k2] = await Promise.all([signingKey('k1'), signingKey('k2')]);
  server.state.keys = [k1.jwk, k2.jwk];
  await server.stop();
  const time = clock();
  const verifier = tokenVerifier(
    { ...base, jwksUrl: server.url },
    { now: time.now, jwksCache: { uat: Date.now() - 31_000, jwks: { keys: [k1.jwk] } } },
  );
  t.equal((await verifier.verify(await k1.sign({ sub: 'u1' }))).subject, 'jwt: u1');
  const unknown = await refusal(async () => verifier.verify(await k2.sign({ sub: 'u2' })));
  t.match(unknown, { code: 'unavailable', status: 503 }, 'a kid the set held lacks, and the set cannot be fetched: perhaps it is in it');
  t.equal((await verifier.verify(await k1.sign({ sub: 'u3' }))).subject, 'jwt: u3', 'k1 still verifies');
});

t.test('a key set answered badly is a 503, not a 401', async (t) => {
  const server = await keySetServer(t);
  const k1 = await signingKey('k1');
  const answers: [number, string][] = [
    [500, '{"error":"oops"}'],
    [302, ''],
    [200, 'not json'],
    [200, '{"nokeys":[]}'],
  ];
  for (const [status, body] of answers) {
    server.state.status = status;
    server.state.body = body;
    const verifier = tokenVerifier({ ...base, jwksUrl: server.url });
    t.match(
      await refusal(async () => verifier.verify(await k1.sign({ sub: 'u' }))),
      { code: 'unavailable', status: 503 },
      `${status} ${body}`,
    );
  }
});

t.test('settings that name no key, or two, are a programming error', async (t) => {
  t.throws(() => tokenVerifier({ ...base }), /exactly one of a secret, a public key and a JWKS URL/);
  t.throws(() => tokenVerifier({ ...base, secret: SECRET, jwksUrl: 'https://id.example.com/jwks' } as TokenSettings), /exactly one/);
  t.throws(() => tokenVerifier({ ...base, publicKey: 'nope' }), /expected a PEM public key/);
});
