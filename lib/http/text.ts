// What text from a client may hold, wherever it arrives (a query string, a JSON body).

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/**
 * Whether `text` holds NUL (PostgreSQL text cannot hold it) or another control character (each would grow
 * six-fold in JSON, in every cursor and body that carries it).
 */
export function hasControlCharacter(text: string): boolean {
  return CONTROL_CHARACTER.test(text);
}
