// Which column names say they hold a secret (lib/collections/safe-defaults.ts): the words, the words about a
// secret that make a column something else, and the kinds that never hold one.
import t from 'tap';
import type { Column } from '../../lib/catalog/model.ts';
import { secretInName } from '../../lib/collections/safe-defaults.ts';

/** A column of a pg_catalog type (`text`, `int4`, `_text` for text[]…). */
function column(name: string, type = 'text'): Column {
  const element = type.startsWith('_') ? column(name, type.slice(1)).type : undefined;
  return {
    name,
    attnum: 1,
    type: {
      schema: 'pg_catalog',
      name: type,
      category: 'S',
      typtype: 'b',
      formatted: type,
      typmod: -1,
      domains: [],
      ...(element ? { element } : {}),
    },
    nullable: true,
    selectable: true,
  };
}

t.test('names that say a secret, and which word says it', async (t) => {
  const cases: [string, string, string][] = [
    ['password', 'text', 'password'],
    ['password_hash', 'text', 'password'],
    ['passwordHash', 'text', 'password'],
    ['hashed_password', 'bytea', 'password'],
    ['PASSWD', 'text', 'passwd'],
    ['salt', 'text', 'salt'],
    ['commit_hash', 'text', 'hash'],
    ['api_token', 'text', 'token'],
    ['apiToken', 'uuid', 'token'],
    ['apitoken', 'text', 'token'],
    ['reset_password_token', 'text', 'password'],
    ['api_key', 'text', 'api key'],
    ['APIKey', 'text', 'api key'],
    ['apikey', 'text', 'apikey'],
    ['private_key', 'text', 'private key'],
    ['aws_secret_access_key', 'text', 'secret'],
    ['clientSecret', 'text', 'secret'],
    ['credentials', 'jsonb', 'credentials'],
    ['otp', 'int4', 'otp'],
    ['pin', 'int4', 'pin'],
    ['recovery_codes', '_text', 'recovery codes'],
  ];
  for (const [name, type, term] of cases) t.equal(secretInName(column(name, type)), term, `${name} (${type})`);
});

t.test('names about a secret, and kinds that hold none', async (t) => {
  const cases: [string, string][] = [
    ['tokens_used', 'int4'],
    ['max_tokens', 'int4'],
    ['token_count', 'int4'],
    ['api_key_id', 'int4'],
    ['access_key_id', 'text'],
    ['api_key_prefix', 'text'],
    ['token_name', 'text'],
    ['hash_algorithm', 'text'],
    ['password_changed_at', 'text'],
    ['password_changed_at', 'timestamptz'],
    ['has_password', 'bool'],
    ['salt_grams', 'numeric'],
    ['passwordless', 'text'],
    ['sort_key', 'text'],
    ['keys', 'text'],
    ['title', 'text'],
  ];
  for (const [name, type] of cases) t.equal(secretInName(column(name, type)), undefined, `${name} (${type})`);
});
