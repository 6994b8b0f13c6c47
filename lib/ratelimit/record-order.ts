// The order of the limiter databases for keys and tiers (docs/how-to/limiter-databases.md, "Several limiter databases"):
// by the record each database keeps of itself (db/identity.ts), oldest first, never by LIMITER_DATABASE_URL's
// order. The first is the source of truth, and every change locks its rows on the databases in this order:
// instances whose lists are in other orders then agree on both, so two changes of one row never hold it on
// two databases in opposite orders and wait for each other until the statement timeout.
import { databaseIdentity } from '../../db/identity.ts';

export interface Recorded {
  readonly url: string;
  /** What the database records about itself (db/identity.ts, recordIdentity). */
  readonly record: string;
}

/**
 * The URLs of `recorded`, oldest record first: a database added later records itself later, so adding one
 * never moves the source of truth to it (an empty database would otherwise be copied over every other at
 * the next start-up). Throws when two URLs lead to one record: one database named twice (two spellings of
 * its host) or one a copy of the other, which would take every change and every subject twice.
 */
export function inRecordOrder(recorded: readonly Recorded[]): string[] {
  const sorted = [...recorded].sort((a, b) => (a.record < b.record ? -1 : a.record > b.record ? 1 : 0));
  for (let i = 1; i < sorted.length; i++) {
    const [before, after] = [sorted[i - 1]!, sorted[i]!];
    if (before.record === after.record) {
      throw new Error(
        `LIMITER_DATABASE_URL names ${databaseIdentity(before.url)} and ${databaseIdentity(after.url)}, which are one database or one a copy of the other (both record ${before.record} in paginated_collections.settings, limiter_identity); name each limiter database once, or give the copy a record of its own with: delete from paginated_collections.settings where name = 'limiter_identity'`,
      );
    }
  }
  return sorted.map((each) => each.url);
}
