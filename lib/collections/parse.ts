// Reading a collections file: YAML or JSON text to its typed model, or every problem, one line each.
import * as v from 'valibot';
import { parse as parseYaml } from 'yaml';
import { parseRelationName } from './names.ts';
import { CollectionsFileError, problemLine } from './problems.ts';
import { type CollectionsFile, collectionsFileSchema } from './schema.ts';

/**
 * The file's collections, checked against its schema (lib/collections/schema.ts): not yet against the
 * database (lib/collections/resolve.ts). `file` is how problems name it. JSON when it ends in .json, YAML
 * otherwise (JSON is YAML too). Throws a CollectionsFileError.
 */
export function parseCollectionsFile(text: string, file: string): CollectionsFile {
  let input: unknown;
  try {
    input = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    // yaml's message continues with the lines around the error; its first line names line and column.
    throw new CollectionsFileError([problemLine(file, undefined, (error as Error).message.split('\n')[0]!)]);
  }
  // valibot would read an array as an object without the key `collections`: say what the file as a whole should be.
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new CollectionsFileError([problemLine(file, undefined, 'the file must be an object with collections')]);
  }
  const result = v.safeParse(collectionsFileSchema, input);
  if (result.success) return result.output;
  const lines = result.issues.map((issue) => issueLine(file, input, issue));
  throw new CollectionsFileError([...new Set(lines)]);
}

function issueLine(file: string, input: unknown, issue: v.BaseIssue<unknown>): string {
  const path = (issue.path ?? []).map((item) => item.key as string | number);
  const inCollection = path[0] === 'collections' && typeof path[1] === 'number';
  const collection = inCollection ? collectionLabel(input, path[1] as number) : undefined;
  const where = (inCollection ? path.slice(2) : path).reduce<string>(
    (text, key) => (typeof key === 'number' ? `${text}[${key}]` : text === '' ? String(key) : `${text}.${String(key)}`),
    '',
  );
  return problemLine(file, collection, describe(where, issue));
}

function describe(where: string, issue: v.BaseIssue<unknown>): string {
  // A strict object reports a key it does not know as expecting `never`, and a required one missing as received `undefined`.
  if (issue.type === 'strict_object' && issue.expected === 'never') return `${where} is not a setting`;
  if (issue.type === 'strict_object' && issue.received === 'undefined') return `${where} is missing`;
  return where === '' ? `the file ${issue.message}` : `${where} ${issue.message}`;
}

/** How a problem names the collection: its name, or its relation's, or its place in the list. */
function collectionLabel(input: unknown, at: number): string {
  const entry = (input as { collections?: unknown[] }).collections?.[at] as { name?: unknown; relation?: unknown } | undefined;
  if (typeof entry?.name === 'string' && entry.name !== '') return entry.name;
  if (typeof entry?.relation === 'string') {
    const relation = parseRelationName(entry.relation);
    if (typeof relation !== 'string') return relation.name;
  }
  return `#${at + 1}`;
}
