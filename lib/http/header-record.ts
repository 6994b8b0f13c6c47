// Plain header records, and merging them: what @hono/node-server sends as they are, where a Headers object costs a copy.

export type HeaderRecord = Readonly<Record<string, string>>;

/**
 * Writes `records` into the plain header record `target`, in order: a later value of a name replaces an earlier
 * one, but for Vary, whose values are joined (what every layer says the answer depends on: Accept-Encoding, Origin).
 */
export function mergeHeaders(target: Record<string, string>, ...records: (HeaderRecord | undefined)[]): Record<string, string> {
  for (const record of records) {
    if (record === undefined) continue;
    for (const name in record) {
      const value = record[name]!;
      const before = name === 'vary' ? target.vary : undefined;
      target[name] = before === undefined ? value : `${before}, ${value}`;
    }
  }
  return target;
}
