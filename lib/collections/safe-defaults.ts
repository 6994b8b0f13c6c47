// Safe defaults (docs/reference/collections-file.md, "Safe defaults"): columns whose names say they hold a secret,
// which init leaves out, and the warnings check and start-up give for a file that serves one, or lists no columns.
import { type Column, qualifiedName } from '../catalog/model.ts';
import { type ValueKind, valueKind } from './kinds.ts';
import type { Collection } from './model.ts';

/** Words that name a secret, or a value it is derived from or checked with. */
const SECRET_WORDS = new Set([
  'password',
  'passwd',
  'pwd',
  'passphrase',
  'hash',
  'salt',
  'token',
  'secret',
  'apikey',
  'credential',
  'credentials',
  'otp',
  'totp',
  'pin',
  'cvv',
  'cvc',
]);

/** Two words that name a secret together: api_key, privateKey, recovery_codes. */
const SECRET_PAIRS: readonly (readonly [string, string])[] = [
  ['api', 'key'],
  ['private', 'key'],
  ['secret', 'key'],
  ['access', 'key'],
  ['signing', 'key'],
  ['encryption', 'key'],
  ['recovery', 'code'],
  ['recovery', 'codes'],
  ['backup', 'code'],
  ['backup', 'codes'],
];

/** Words a name runs together with a secret's (apitoken, userpassword, passwordhash): matched at a word's end. */
const SECRET_ENDINGS = ['password', 'passwd', 'token', 'secret', 'apikey', 'hash'];

/**
 * Words that, right after a secret's, make the column one about the secret rather than the secret:
 * api_key_id, token_count, password_changed_at, token_expires_at, api_key_prefix, token_name.
 */
const ABOUT_WORDS = new Set([
  'id',
  'ids',
  'uuid',
  'count',
  'used',
  'attempts',
  'tries',
  'failures',
  'limit',
  'max',
  'min',
  'total',
  'quota',
  'expires',
  'expiry',
  'expiration',
  'expired',
  'at',
  'on',
  'date',
  'time',
  'changed',
  'updated',
  'created',
  'set',
  'reset',
  'length',
  'type',
  'kind',
  'version',
  'algorithm',
  'policy',
  'required',
  'enabled',
  'status',
  'prefix',
  'last4',
  'name',
  'label',
  'description',
  'scope',
  'scopes',
  'url',
]);

/**
 * Kinds that never hold a secret: a flag, a time, a decimal or an enum's label (has_password, password_changed,
 * salt_grams); text, uuid, bytea, documents, arrays and integers (a PIN, a one-time code) may.
 */
const NEVER_SECRET: ReadonlySet<ValueKind> = new Set([
  'boolean',
  'date',
  'timestamp',
  'timestamptz',
  'time',
  'interval',
  'decimal',
  'enum',
  'tsvector',
]);

/** A name's words, lower case: split at anything but letters and digits, and where camelCase starts a word. */
function words(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter((word) => word !== '')
    .map((word) => word.toLowerCase());
}

/**
 * What in a column's name says it holds a secret (`password` for password_hash, `api key` for apiKey), or
 * undefined. A secret's word followed by a word about it (id, count, expires, at, name…) names something
 * else; `tokens` (tokens_used, max_tokens) counts a language model's tokens. A column of a kind that holds no
 * secret (a flag, a time, a decimal, an enum) is never one.
 */
export function secretInName(column: Column): string | undefined {
  const kind = valueKind(column.type);
  if (kind !== undefined && NEVER_SECRET.has(kind)) return undefined;
  const list = words(column.name);
  for (let at = 0; at < list.length; at += 1) {
    const word = list[at]!;
    const pair = SECRET_PAIRS.find(([first, second]) => first === word && list[at + 1] === second);
    const term = pair
      ? pair.join(' ')
      : SECRET_WORDS.has(word)
        ? word
        : SECRET_ENDINGS.find((ending) => word.endsWith(ending) && word.length > ending.length);
    if (term === undefined) continue;
    const next = list[at + (pair ? 2 : 1)];
    if (next === undefined || !ABOUT_WORDS.has(next)) return term;
  }
  return undefined;
}

/**
 * One line each for what a file serves by default that it may not mean to: a served column whose name says it
 * holds a secret, and a collection without a columns list, whose served columns change with its table.
 * `source` names the file, as problems do.
 */
export function safeDefaultWarnings(collections: readonly Collection[], source: string): string[] {
  const lines: string[] = [];
  for (const collection of collections) {
    const warn = (text: string) => lines.push(`Warning: collections file ${source}, collection ${collection.name}: ${text}`);
    if (!collection.columnsListed) {
      warn(
        `no columns list: it serves every column of ${qualifiedName(collection.relation)}, and any column added to it once the catalog is read again; list the columns to serve`,
      );
    }
    for (const field of collection.fields) {
      const secret = secretInName(field.column);
      if (secret !== undefined) {
        warn(
          `column ${field.column.name} is served, and its name says it holds a secret (${secret}): leave it out unless every client may read it`,
        );
      }
    }
  }
  return lines;
}
