// `init`: a starting collections file for a database, from its catalog model alone (a pure function; the CLI prints it).
import { Document, isSeq, visit } from 'yaml';
import { type CatalogModel, type Column, listedRelations, qualifiedName, type Relation } from '../catalog/model.ts';
import { JSON_SCHEMA_PATH } from './json-schema.ts';
import { operatorsFor, servedByDefault, sortable, valueKind } from './kinds.ts';
import { camelCase, FIELD_NAME, PARAMETER_NAMES } from './names.ts';
import { servingIndex, withKey } from './orders.ts';
import { secretInName } from './safe-defaults.ts';

export interface InitOptions {
  /** The JSON Schema the file names for editors (relative to where it is saved). Default: docs/collections.schema.json. */
  readonly schema?: string;
}

/**
 * The file `npm run collections -- init` prints, which the service serves as it is: every table with a usable key, with
 * its columns of supported types the role may read, named as they are, each listed (the columns served then change
 * only with the file) but those whose names say they hold a secret; as sort keys, the columns whose order an index
 * serves; as equality filters, the columns that lead a btree index; offset, page and cursor, cursor by default. Views,
 * and tables without a key, follow commented out: init guesses no key (a guessed one that two rows share serves some
 * rows twice and others never), so an entry has a key only where a unique index gives one, and otherwise says to add
 * one. What it leaves out it says in comments.
 */
export function initFile(catalog: CatalogModel, options: InitOptions = {}): string {
  const lines = [
    `# yaml-language-server: $schema=${options.schema ?? JSON_SCHEMA_PATH}`,
    "# A starting collections file, written by init from the database's catalog (docs/reference/collections-file.md).",
    'collections:',
  ];
  const names = new Set<string>();
  const pending: string[] = [];
  let served = 0;
  for (const relation of listedRelations(catalog)) {
    const isView = relation.kind === 'view' || relation.kind === 'materialized view';
    const entry = isView ? viewEntry(relation, names) : tableEntry(relation, names);
    if (typeof entry === 'string') lines.push(`  # ${qualifiedName(relation)} left out: ${entry}`);
    else if (entry.commented) pending.push(...entry.lines.map((line) => `  # ${line}`));
    else {
      lines.push(...entry.lines.map((line) => `  ${line}`));
      served += 1;
    }
  }
  if (pending.length > 0) {
    lines.push(
      '  # Views, whose keys the catalog does not know but from a unique index, and tables without a key: where an entry',
      '  # has no key, add one (key: [the columns that identify a row: no two rows share them, none is NULL]); check tests',
      '  # it. Then uncomment.',
      ...pending,
    );
  }
  if (served === 0) lines.push('  []');
  return `${lines.join('\n')}\n`;
}

/** An entry's YAML lines, and whether they are to be commented out (a view, or a relation without a key). */
interface Entry {
  readonly lines: string[];
  readonly commented: boolean;
}

/** What init says where it finds no key to write. */
const NO_KEY = 'add key: [the columns that identify a row], then uncomment';

/** A table's entry, or why it is left out: commented out, without sorts, when the table has no key. */
function tableEntry(relation: Relation, names: Set<string>): Entry | string {
  const key = relation.primaryKey ?? relation.uniqueKeys[0];
  const { columns, notes } = servedColumns(relation);
  if (!key) {
    const nullable = relation.indexes.find((index) => index.unique && !index.partial && index.columns.every((c) => c.column !== undefined));
    const why = nullable
      ? `no primary key nor unique key over NOT NULL columns (${nullable.name} is unique, but allows NULLs)`
      : 'no primary key nor unique key over NOT NULL columns';
    if (columns.length === 0) return `${why}, and no column it could serve`;
    const entry = {
      relation: qualifiedName(relation),
      ...nameOf(relation, names),
      columns: columns.map((column) => column.name),
      variants: ['offset', 'page', 'cursor'],
      defaultVariant: 'cursor',
    };
    return { lines: [...entryLines(entry), `  # no key: ${why}; ${NO_KEY}`, ...notes.map((note) => `  # ${note}`)], commented: true };
  }
  const missing = key.columns.find((name) => !columns.some((column) => column.name === name));
  if (missing !== undefined) return `its key column ${missing} cannot be served (${notes.join('; ') || 'its type'})`;
  const sort = columns
    .filter((column) => sortable(valueKind(column.type)!))
    .filter((column) => servingIndex(relation, withKey([{ column: column.name, descending: false }], key.columns)) !== undefined)
    .map((column) => column.name);
  // A column leading only indexes that end before the key, are partial, or put NULLs elsewhere would be sorted in full.
  const unserved = columns
    .filter((column) => !sort.includes(column.name) && sortable(valueKind(column.type)!))
    .filter((column) => relation.indexes.some((index) => index.columns[0]?.column === column.name))
    .map((column) => column.name);
  if (unserved.length > 0) {
    notes.unshift(
      `not sort keys: ${unserved.join(', ')} (they lead an index, but none that serves their order then the key: see docs/reference/collections-file.md)`,
    );
  }
  const filters = Object.fromEntries(
    columns
      .filter((column) => relation.indexes.some((index) => index.columns[0]?.column === column.name))
      .filter((column) => operatorsFor(valueKind(column.type)!).includes('eq') && !PARAMETER_NAMES.has(column.name))
      .map((column) => [column.name, ['eq']]),
  );
  const entry = {
    relation: qualifiedName(relation),
    ...nameOf(relation, names),
    columns: columns.map((column) => column.name),
    ...(sort.length > 0 ? { sort } : {}),
    ...(Object.keys(filters).length > 0 ? { filters } : {}),
    variants: ['offset', 'page', 'cursor'],
    defaultVariant: 'cursor',
  };
  return { lines: [...entryLines(entry), ...notes.map((note) => `  # ${note}`)], commented: false };
}

/**
 * A view's entry, to be commented out: its key a whole unique index's columns (a materialized view's own), else none,
 * with a note to add one. The catalog holds nothing else that says which columns identify a view's rows.
 */
function viewEntry(relation: Relation, names: Set<string>): Entry | string {
  const { columns, notes } = servedColumns(relation);
  if (columns.length === 0) return 'no column it could serve';
  const served = (name: string | undefined) => columns.some((column) => column.name === name);
  const unique = relation.indexes.find((index) => index.unique && !index.partial && index.columns.every((c) => served(c.column)));
  const entry = {
    relation: qualifiedName(relation),
    ...nameOf(relation, names),
    columns: columns.map((column) => column.name),
    ...(unique === undefined ? {} : { key: unique.columns.map((column) => column.column!) }),
    unindexedSorts: true,
    variants: ['offset', 'page', 'cursor'],
    defaultVariant: 'cursor',
  };
  if (unique === undefined) notes.unshift(`no key: a ${relation.kind} has none the catalog knows; ${NO_KEY}`);
  if (!relation.populated) notes.push('not populated: REFRESH MATERIALIZED VIEW it before serving it');
  return { lines: [...entryLines(entry), ...notes.map((note) => `  # ${note}`)], commented: true };
}

/**
 * The columns init serves, and a note for each column it leaves out: of a type not served, one the role may not
 * read, a name that is no field name (with the `fields` entry that would serve it), and a name that says it holds a secret (docs/reference/collections-file.md,
 * "Safe defaults"), which is then no sort key nor filter either.
 */
function servedColumns(relation: Relation): { columns: Column[]; notes: string[] } {
  const columns: Column[] = [];
  const notes: string[] = [];
  for (const column of relation.columns) {
    const kind = valueKind(column.type);
    if (!servedByDefault(kind))
      notes.push(`left out: ${column.name} (${column.type.formatted}, not served${kind === 'bytea' ? ' unless listed' : ''})`);
    else if (!column.selectable) notes.push(`left out: ${column.name} (the role may not SELECT it)`);
    else if (!FIELD_NAME.test(column.name)) notes.push(`left out: ${JSON.stringify(column.name)} (${noFieldName(column.name)})`);
    else {
      const secret = secretInName(column);
      if (secret === undefined) columns.push(column);
      else notes.push(`left out: ${column.name} (its name says it holds a secret: ${secret}; list it in columns to serve it)`);
    }
  }
  return { columns, notes };
}

/** Why a column is no field as it is named, and the `fields` entry that serves it (its camelCase where that is a field name). */
function noFieldName(name: string): string {
  const camel = camelCase(name);
  const field = FIELD_NAME.test(camel) ? camel : '<a name of ASCII letters, digits and _>';
  return `no field name, which is ASCII letters, digits and _; serve it with fields: { ${JSON.stringify(name)}: ${field} }`;
}

/** `name` when the relation's own is no collection name, or is taken (the same name in two schemas). */
function nameOf(relation: Relation, names: Set<string>): { name?: string } {
  const sanitize = (text: string) => text.replace(/[^A-Za-z0-9_-]+/g, '_').replace(/^[^A-Za-z]+/, '');
  const candidates = [relation.name, `${relation.schema}_${relation.name}`].map(sanitize).filter((name) => name !== '' && name !== 'keys');
  const base = candidates.at(-1) ?? 'collection';
  let name = candidates.find((candidate) => !names.has(candidate)) ?? base;
  for (let n = 2; names.has(name); n += 1) name = `${base}_${n}`;
  names.add(name);
  return name === relation.name ? {} : { name };
}

/** The entry as the lines of a YAML list item, lists in flow style. */
function entryLines(entry: Record<string, unknown>): string[] {
  const document = new Document([entry]);
  visit(document, {
    Seq(_, node, path) {
      if (path.length > 1 && isSeq(node)) node.flow = true;
    },
  });
  return document.toString({ lineWidth: 0, flowCollectionPadding: false }).trimEnd().split('\n');
}
