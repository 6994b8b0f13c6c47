// A bad collections file's problems: one line each, naming the file, the collection and what is wrong.

/** Thrown for a file that cannot be served; its message is its problems, one a line. */
export class CollectionsFileError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(problems.join('\n'));
    this.name = 'CollectionsFileError';
    this.problems = problems;
  }
}

/** `Invalid collections file collections.yaml, collection films: no column titel in public.films`. */
export function problemLine(file: string, collection: string | undefined, problem: string): string {
  return `Invalid collections file ${file}${collection === undefined ? '' : `, collection ${collection}`}: ${problem}`;
}
