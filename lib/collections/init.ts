// `init`: a starting collections file for a database, from its catalog model alone (a pure function; the CLI prints it).
import { Document, isSeq, visit } from 'yaml';
import { type CatalogModel, type Column, listedRelations, qualifiedName, type Relation } from '../catalog/model.ts';
import { JSON_SCHEMA_PATH } from './json-schema.ts';
import { operatorsFor, servedByDefault, sortable, valueKind } from './kinds.ts';
import { FIELD_NAME, PARAMETER_NAMES } from './names.ts';
import { servingIndex, withKey } from './orders.ts';
import { secretInName } from './safe-defaults.ts';

export interface InitOptions {
  /** The JSON Schema the file names for editors (relative to where it is saved). Default: docs/collections.schema.json. */
  readonly schema?: string;
}

/**
 * The file `npm run collections -- init` prints, which the service serves as it is: every table with a
 * usable key, with its columns of supported types the role may read, named as they are, each listed (the
 * columns served then change only with the file) but those whose names say they hold a secret; as sort keys, the
 * columns whose order an index serves; as equality filters, the columns that lead a btree index; offset,
 * page and cursor, cursor by default. Each view follows commented out, with a placeholder key to check.
 * What it leaves out it says in comments.
 */
export function initFile(catalog: CatalogModel, options: InitOptions = {}): string {
  const lines = [
    `# yaml-language-server: $schema=${options.schema ?? JSON_SCHEMA_PATH}`,
    "# A starting collections file, written by init from the database's catalog (docs/reference/collections-file.md).",
    'collections:',
  ];
  const names = new Set<string>();
  const views: string[] = [];
  for (const relation of listedRelations(catalog)) {
    const isView = relation.kind === 'view' || relation.kind === 'materialized view';
    const entry = isView ? viewEntry(relation, names) : tableEntry(relation, names);
    if (typeof entry === 'string') lines.push(`  # ${qualifiedName(relation)} left out: ${entry}`);
    else if (isView) views.push(...entry.map((line) => `  # ${line}`));
    else lines.push(...entry.map((line) => `  ${line}`));
  }
  if (views.length > 0) {
    lines.push(
      '  # Views have no key the catalog knows, nor indexes of their own: check the key (the columns that identify',
      '  # a row), then uncomment.',
      ...views,
    );
  }
  if (names.size === 0) lines.push('  []');
  return `${lines.join('\n')}\n`;
}

/** A table's entry as YAML lines, or why it is left out. */
function tableEntry(relation: Relation, names: Set<string>): string[] | string {
  const key = relation.primaryKey ?? relation.uniqueKeys[0];
  if (!key) return 'no primary key nor unique key over NOT NULL columns';
  const { columns, notes } = servedColumns(relation);
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
  return [...entryLines(entry), ...notes.map((note) => `  # ${note}`)];
}

/** A view's entry (to be commented out): its placeholder key a unique index's columns, or its first orderable column. */
function viewEntry(relation: Relation, names: Set<string>): string[] | string {
  const { columns, notes } = servedColumns(relation);
  const served = (name: string | undefined) => columns.some((column) => column.name === name);
  const unique = relation.indexes.find((index) => index.unique && !index.partial && index.columns.every((c) => served(c.column)));
  const placeholder =
    unique?.columns.map((column) => column.column!) ??
    columns
      .filter((column) => sortable(valueKind(column.type)!))
      .slice(0, 1)
      .map((c) => c.name);
  if (placeholder.length === 0) return 'no column it could be keyed by';
  const entry = {
    relation: qualifiedName(relation),
    ...nameOf(relation, names),
    columns: columns.map((column) => column.name),
    key: placeholder,
    unindexedSorts: true,
    variants: ['offset', 'page', 'cursor'],
    defaultVariant: 'cursor',
  };
  if (!relation.populated) notes.push('not populated: REFRESH MATERIALIZED VIEW it before serving it');
  return [...entryLines(entry), ...notes.map((note) => `  # ${note}`)];
}

/**
 * The columns init serves, and a note for each column it leaves out: of a type not served, one the role may not
 * read, a name that is no parameter name, and a name that says it holds a secret (docs/reference/collections-file.md,
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
    else if (!FIELD_NAME.test(column.name))
      notes.push(`left out: ${JSON.stringify(column.name)} (no parameter name; serve it with fieldNames: camelCase)`);
    else {
      const secret = secretInName(column);
      if (secret === undefined) columns.push(column);
      else notes.push(`left out: ${column.name} (its name says it holds a secret: ${secret}; list it in columns to serve it)`);
    }
  }
  return { columns, notes };
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
