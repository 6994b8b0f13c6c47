// Names in the collections file: relation names as written (schema-qualified, quoted where needed) and field names.
import type { QualifiedName } from '../catalog/model.ts';

/** The schema of a relation named without one. */
const DEFAULT_SCHEMA = 'public';

/**
 * `schema.name`, `name` (in public), or either part double-quoted (`"my.schema"."Album"`, a doubled `""` for
 * a quote). Parts are compared with the catalog exactly: unlike SQL, nothing is folded to lower case, so
 * `Music.Album` and `"Music"."Album"` name the same relation. A string, the reason, when it is not a name.
 */
export function parseRelationName(text: string): QualifiedName | string {
  const parts: string[] = [];
  let at = 0;
  while (at <= text.length) {
    let part = '';
    if (text[at] === '"') {
      const end = closingQuote(text, at + 1);
      if (end === -1) return 'has an unclosed double quote';
      part = text.slice(at + 1, end).replaceAll('""', '"');
      at = end + 1;
    } else {
      const end = text.indexOf('.', at);
      part = text.slice(at, end === -1 ? text.length : end);
      if (part.includes('"')) return 'has a double quote inside a name; quote the whole part';
      at += part.length;
    }
    if (part === '') return 'has an empty part';
    parts.push(part);
    if (at === text.length) break;
    if (text[at] !== '.') return 'must be a name or schema.name, a part double-quoted where it holds a dot';
    at += 1;
    if (at === text.length) return 'has an empty part';
  }
  if (parts.length === 1) return { schema: DEFAULT_SCHEMA, name: parts[0]! };
  if (parts.length === 2) return { schema: parts[0]!, name: parts[1]! };
  return 'must be a name or schema.name, a part double-quoted where it holds a dot';
}

function closingQuote(text: string, from: number): number {
  for (let at = from; at < text.length; at += 1) {
    if (text[at] !== '"') continue;
    if (text[at + 1] === '"') at += 1;
    else return at;
  }
  return -1;
}

/**
 * release_year as releaseYear, AlbumId as albumId, film_ID as filmId: words split at anything but letters and digits,
 * of any script, each kept whole (Größe as größe, which FIELD_NAME then refuses: such a column is named with `fields`).
 */
export function camelCase(name: string): string {
  const words = name.split(/[^\p{L}\p{N}]+/u).filter((word) => word !== '');
  return words
    .map((word, at) => {
      const cased = word === word.toUpperCase() ? word.toLowerCase() : word;
      const [first = '', ...rest] = [...cased];
      return (at === 0 ? first.toLowerCase() : first.toUpperCase()) + rest.join('');
    })
    .join('');
}

/**
 * What a field may be called: a query parameter names it bare (`title=`, `title[prefix]=`, `sort=-title`), and so do
 * the OpenAPI document's parameters and the typed client's names. ASCII only, so that each is written as it is in a
 * URL, a link and a TypeScript name; a column named otherwise is served under a name of `fields`.
 */
export const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** What a collection may be called: its path under /v1. */
export const COLLECTION_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;

/** The variants' query parameters: a field of one of these names filtered bare (`page=3`) would be read as the parameter. */
export const PARAMETER_NAMES: ReadonlySet<string> = new Set([
  'limit',
  'offset',
  'sort',
  'count',
  'page',
  'page-size',
  'cursor',
  'since_id',
  'before',
  'after',
]);

/**
 * PostgreSQL's reserved key words, and those reserved but for function and type names (its documentation,
 * "SQL Key Words"): a column named one of them is quoted where a statement names it.
 */
const RESERVED = new Set(
  (
    'all analyse analyze and any array as asc asymmetric authorization binary both case cast check collate collation column ' +
    'concurrently constraint create cross current_catalog current_date current_role current_schema current_time ' +
    'current_timestamp current_user default deferrable desc distinct do else end except false fetch for foreign freeze from ' +
    'full grant group having ilike in initially inner intersect into is isnull join lateral leading left like limit localtime ' +
    'localtimestamp natural not notnull null offset on only or order outer overlaps placing primary references returning ' +
    'right select session_user similar some symmetric system_user table tablesample then to trailing true union unique user ' +
    'using variadic verbose when where window with'
  ).split(' '),
);

/** An identifier as a SQL statement writes it: bare when lower-case letters, digits and _ and no reserved word, else double-quoted. */
export function sqlIdentifier(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) && !RESERVED.has(name) ? name : `"${name.replaceAll('"', '""')}"`;
}
