// Bearer tokens: JWTs from the team's identity provider, verified with jose against a shared secret, a public key or
// a JSON Web Key Set, and remembered until they expire (docs/reference/configuration.md, "Tokens").
import { createHash, createPublicKey, createSecretKey, type KeyObject } from 'node:crypto';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  type ExportedJWKSCache,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwksCache,
  jwtVerify,
} from 'jose';
import { ApiError } from '../http/errors.ts';

/** JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL (exactly one), and the rest of the JWT settings (lib/service/config.ts). */
export interface TokenSettings {
  readonly secret?: string;
  /** PEM: SPKI (`BEGIN PUBLIC KEY`) or PKCS#1 (`BEGIN RSA PUBLIC KEY`). */
  readonly publicKey?: string;
  readonly jwksUrl?: string;
  readonly issuer?: string;
  readonly audience?: string;
  readonly tierClaim: string;
  readonly defaultTier: string;
}

/** Who a verified token names, and what it may read. */
export interface TokenClient {
  /** The rate-limit subject: from iss and sub, `jwt:<iss> <sub>`, or `jwt:#<digest>` when that would be long or ambiguous. */
  readonly subject: string;
  /** The claim `tierClaim` when it is a string, else `defaultTier`. */
  readonly tier: string;
  /** The claim `collections` when present (an array of strings), else undefined: every collection. */
  readonly collections: readonly string[] | undefined;
  /** The whole verified payload, frozen. */
  readonly claims: Readonly<Record<string, unknown>>;
}

export interface TokenVerifier {
  /** The token's client, at once when the token was verified before; a 401 `invalid_token` or a 503 `unavailable` when not. */
  verify(token: string): TokenClient | Promise<TokenClient>;
}

export interface TokenVerifierOptions {
  /** The clock, in ms since the epoch: `exp` and `nbf`, the cache's lifetimes, the pause after a failed fetch of the key set. */
  readonly now?: () => number;
  /** A key set fetched before, as jose keeps it (`uat`: when, by Date.now, which jose's cooldown reads): the set to start from. */
  readonly jwksCache?: ExportedJWKSCache;
}

/** Seconds of skew allowed on `exp` and `nbf`: the identity provider's clock and ours differ. */
const CLOCK_TOLERANCE_S = 30;
/** A token naming a `kid` the key set lacks refetches the set at most this often: unknown kids are free to send. */
const JWKS_COOLDOWN_MS = 30_000;
/** A key set is fetched again after this long, so that a key the provider removed stops verifying. */
const JWKS_MAX_AGE_MS = 600_000;
/** A fetch of the key set gives up after this long (the requests waiting on it answer 503). */
const JWKS_TIMEOUT_MS = 3000;
/** After a failed fetch, the set is not fetched again for this long: a provider that is down is not asked on every request. */
const JWKS_RETRY_MS = 5000;
/** Verified tokens remembered; beyond that, the one used longest ago is forgotten. */
const CACHE_ENTRIES = 10_000;
/** A verified token is verified again after this long even before its `exp` (or without one). */
const CACHE_MAX_MS = 300_000;
const SUBJECT_MAX = 200;

/** Every asymmetric algorithm jose verifies: a key set's keys say which is theirs (kty, crv, alg). Never HS*. */
const JWKS_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

const EC_ALGORITHMS: Record<string, string> = { prime256v1: 'ES256', secp384r1: 'ES384', secp521r1: 'ES512' };

/** A JWT in compact form: three base64url segments (the signature's empty for `alg: none`, which then fails as such). */
export function looksLikeJwt(credential: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(credential);
}

/**
 * A PEM public key and the algorithms it verifies: the one its type implies (RSA: RS256; EC P-256, P-384, P-521:
 * ES256, ES384, ES512; Ed25519: EdDSA, by either name), so that a token cannot pick another (algorithm confusion).
 * Throws an Error saying what is wrong with the text; `\n` escapes count as line breaks (one-line environment files).
 */
export function publicKeyOf(pem: string): { readonly key: KeyObject; readonly algorithms: readonly string[] } {
  const text = pem.replace(/\\n/g, '\n');
  // A private key or a certificate would be read too (createPublicKey derives the public half): refused, since a
  // private key has no business in the service's environment.
  if (!/-----BEGIN (RSA )?PUBLIC KEY-----/.test(text)) throw new Error('expected a PEM public key (-----BEGIN PUBLIC KEY-----)');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: text, format: 'pem' });
  } catch {
    throw new Error('the PEM text is not a public key that can be read');
  }
  const type = key.asymmetricKeyType;
  if (type === 'rsa') {
    // jose refuses RSA keys under 2048 bits at each verification: refused here, once.
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < 2048) throw new Error(`an RSA key needs at least 2048 bits, this one has ${bits}`);
    return { key, algorithms: ['RS256'] };
  }
  if (type === 'ec') {
    const algorithm = EC_ALGORITHMS[key.asymmetricKeyDetails?.namedCurve ?? ''];
    if (algorithm !== undefined) return { key, algorithms: [algorithm] };
  }
  if (type === 'ed25519') return { key, algorithms: ['EdDSA', 'Ed25519'] };
  throw new Error('expected an RSA (RS256), EC P-256 (ES256), P-384 (ES384), P-521 (ES512) or Ed25519 (EdDSA) key');
}

/** Verifies tokens as `settings` say; throws an Error when they name no key, or a bad one. */
/** Tokens up to this many characters are cached under their own text (an HS256 token with a few claims is ~200). */
const CACHED_AS_IS = 1024;

export function tokenVerifier(settings: TokenSettings, options: TokenVerifierOptions = {}): TokenVerifier {
  const now = options.now ?? Date.now;
  const { key, algorithms } = keysOf(settings, now, options.jwksCache);
  const cache = new Map<string, { readonly client: TokenClient; readonly until: number }>();
  // The verifications under way: the same token sent several times at once is verified once.
  const pending = new Map<string, Promise<TokenClient>>();

  async function check(token: string): Promise<TokenClient> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms: [...algorithms],
        clockTolerance: CLOCK_TOLERANCE_S,
        currentDate: new Date(now()),
        ...(settings.issuer === undefined ? {} : { issuer: settings.issuer }),
        ...(settings.audience === undefined ? {} : { audience: settings.audience }),
      }));
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw new ApiError('invalid_token', `Invalid token: ${reasonOf(error, token, settings, algorithms)}`);
    }
    return clientOf(payload, settings);
  }

  function remember(id: string, client: TokenClient): void {
    const exp = client.claims.exp;
    const at = now();
    // Until `exp` itself, not its tolerance: past it, the token is verified again, and refused 30 s later.
    const until = Math.min(at + CACHE_MAX_MS, typeof exp === 'number' ? exp * 1000 : Number.POSITIVE_INFINITY);
    if (until <= at) return;
    cache.set(id, { client, until });
    if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  }

  return {
    verify(token) {
      // A token of ordinary length by itself; a longer one by its digest: 10,000 tokens of a few KiB each would be
      // tens of MiB of keys, and hashing every ordinary token costs each request that sends it again.
      const id = token.length <= CACHED_AS_IS ? token : createHash('sha256').update(token).digest('base64url');
      const known = cache.get(id);
      if (known !== undefined) {
        cache.delete(id);
        if (now() < known.until) {
          cache.set(id, known);
          return known.client;
        }
      }
      const under = pending.get(id);
      if (under !== undefined) return under;
      const verification = check(token).then((client) => {
        remember(id, client);
        return client;
      });
      pending.set(id, verification);
      const done = () => pending.delete(id);
      verification.then(done, done);
      return verification;
    },
  };
}

/** The key (or key resolver) and the algorithms of the one key source the settings name. */
function keysOf(
  settings: TokenSettings,
  now: () => number,
  cache: ExportedJWKSCache | undefined,
): { key: KeyObject | JWTVerifyGetKey; algorithms: readonly string[] } {
  const { secret, publicKey, jwksUrl } = settings;
  const sources = [secret, publicKey, jwksUrl].filter((source) => source !== undefined).length;
  if (sources !== 1) throw new Error('Token settings need exactly one of a secret, a public key and a JWKS URL');
  if (secret !== undefined) return { key: createSecretKey(Buffer.from(secret, 'utf8')), algorithms: ['HS256'] };
  if (publicKey !== undefined) return publicKeyOf(publicKey);
  return { key: remoteKeys(new URL(jwksUrl!), now, cache), algorithms: JWKS_ALGORITHMS };
}

/**
 * The keys of a JSON Web Key Set at `url`, fetched by jose: cached for JWKS_MAX_AGE_MS, fetched again for an
 * unknown `kid` at most once every JWKS_COOLDOWN_MS. When a fetch fails, the set fetched last (if any) keeps
 * verifying the tokens whose key it holds; any other token, or every token before a first set, is a 503, and the
 * set is not asked for again for JWKS_RETRY_MS.
 */
function remoteKeys(url: URL, now: () => number, cache: ExportedJWKSCache | undefined): JWTVerifyGetKey {
  const remote = createRemoteJWKSet(url, {
    cooldownDuration: JWKS_COOLDOWN_MS,
    cacheMaxAge: JWKS_MAX_AGE_MS,
    timeoutDuration: JWKS_TIMEOUT_MS,
    ...(cache === undefined ? {} : { [jwksCache]: cache }),
  });
  let held: JWTVerifyGetKey | undefined;
  let retryAt = Number.NEGATIVE_INFINITY;

  function unavailable(): ApiError {
    const seconds = Math.max(1, Math.ceil((retryAt - now()) / 1000));
    return new ApiError('unavailable', 'The key set of JWT_JWKS_URL cannot be fetched, so tokens cannot be verified', {
      headers: { 'retry-after': String(seconds) },
    });
  }

  async function fromHeld(...args: Parameters<JWTVerifyGetKey>) {
    const jwks = remote.jwks();
    if (jwks === undefined) throw unavailable();
    held ??= createLocalJWKSet(jwks);
    try {
      return await held(...args);
    } catch (error) {
      if (error instanceof errors.JWKSMultipleMatchingKeys) throw error;
      // The kid may be in the set that could not be fetched: the client cannot act on a 401 for it.
      throw unavailable();
    }
  }

  return async function keyOf(...args: Parameters<JWTVerifyGetKey>) {
    if (now() < retryAt) return fromHeld(...args);
    try {
      const key = await remote(...args);
      held = undefined;
      return key;
    } catch (error) {
      // The token's own faults; anything else is the fetch's (refused, timed out, not 200, not a key set).
      if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) throw error;
      if (error instanceof errors.JOSENotSupported) throw error;
      retryAt = now() + JWKS_RETRY_MS;
      return fromHeld(...args);
    }
  };
}

/** The client of a verified payload; a 401 when `sub`, `iss` or `collections` is not what it must be. */
function clientOf(payload: JWTPayload, settings: TokenSettings): TokenClient {
  const { iss, sub, collections } = payload;
  if (typeof sub !== 'string' || sub === '') throw new ApiError('invalid_token', 'Invalid token: it has no subject (sub)');
  if (iss !== undefined && typeof iss !== 'string') throw new ApiError('invalid_token', 'Invalid token: its issuer (iss) is not a string');
  if (collections !== undefined && !(Array.isArray(collections) && collections.every((name) => typeof name === 'string'))) {
    throw new ApiError('invalid_token', 'Invalid token: its claim collections must be an array of collection names');
  }
  const tier = payload[settings.tierClaim];
  return Object.freeze({
    subject: subjectOf(iss ?? '', sub),
    tier: typeof tier === 'string' ? tier : settings.defaultTier,
    collections: collections === undefined ? undefined : Object.freeze([...(collections as string[])]),
    claims: deepFreeze(payload),
  });
}

/**
 * `jwt:<iss> <sub>`: one subject per issuer and subject, as the limiter counts them. Its digest instead when that
 * would be long, or ambiguous (a space in iss), or not text PostgreSQL stores as it is (control characters, lone
 * surrogates): the limiter's rows are keyed by it.
 */
function subjectOf(iss: string, sub: string): string {
  const plain = `jwt:${iss} ${sub}`;
  if (plain.length <= SUBJECT_MAX && !iss.includes(' ') && !/[\p{Cc}\p{Cs}]/u.test(plain)) return plain;
  return `jwt:#${createHash('sha256')
    .update(JSON.stringify([iss, sub]))
    .digest('base64url')}`;
}

/** A cached client is shared by every request that sends its token: none may change its claims. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/** What a client can act on, from jose's error. */
function reasonOf(error: unknown, token: string, settings: TokenSettings, algorithms: readonly string[]): string {
  if (error instanceof errors.JWTExpired) return `it expired at ${dateOf(error.payload.exp)}`;
  if (error instanceof errors.JWTClaimValidationFailed) {
    const { claim, reason } = error;
    if (reason === 'missing') return `it has no claim ${claim}`;
    if (claim === 'iss') return `its issuer (iss) must be ${JSON.stringify(settings.issuer)}`;
    if (claim === 'aud') return `its audience (aud) must include ${JSON.stringify(settings.audience)}`;
    if (claim === 'nbf' && reason === 'check_failed') return `it is not valid before ${dateOf(error.payload.nbf)}`;
    return `its claim ${claim} must be a number of seconds since the epoch`;
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'its signature does not match';
  if (error instanceof errors.JOSEAlgNotAllowed)
    return `its algorithm ${algorithmOf(token)} is not accepted; expected ${algorithms.join(' or ')}`;
  if (error instanceof errors.JWKSNoMatchingKey) return `no key of the key set matches it (kid ${kidOf(token)})`;
  if (error instanceof errors.JWKSMultipleMatchingKeys) return 'it names no key (kid) and several keys of the key set could verify it';
  if (error instanceof errors.JOSEError) return `it is malformed: ${error.message}`;
  return `it cannot be verified: ${error instanceof Error ? error.message : String(error)}`;
}

function dateOf(seconds: unknown): string {
  const date = new Date(typeof seconds === 'number' ? seconds * 1000 : Number.NaN);
  return Number.isNaN(date.getTime()) ? String(seconds) : date.toISOString();
}

function headerOf(token: string): Record<string, unknown> {
  try {
    return decodeProtectedHeader(token);
  } catch {
    return {};
  }
}

/** A header value, quoted and cut short: the client wrote it. */
function quoted(value: unknown): string {
  return value === undefined ? 'none' : JSON.stringify(value).slice(0, 60);
}

function algorithmOf(token: string): string {
  return quoted(headerOf(token).alg);
}

function kidOf(token: string): string {
  return quoted(headerOf(token).kid);
}
