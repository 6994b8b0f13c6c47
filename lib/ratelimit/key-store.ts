// Keys and tiers on the limiter databases (docs/how-to/limiter-databases.md): every decision reads
// them inside its one statement, so each limiter database holds all of them. The databases come in the
// order of their own records (record-order.ts), the same at every instance whatever LIMITER_DATABASE_URL's
// order: the first is the source of truth, where reads come from and every change is made, and a change
// locks its rows on the others one after another in that order, before it commits anywhere. Every change so
// takes its locks in one order across the databases, and two changes of one row, through two instances,
// queue on the first database rather than each hold it on a database the other waits for.
import { asc, inArray, notInArray, sql } from 'drizzle-orm';
import type { PgDatabase } from 'drizzle-orm/pg-core';
import type { PostgresJsQueryResultHKT } from 'drizzle-orm/postgres-js';
import type { Drizzle, LimiterDatabase } from '../../db/client.ts';
import type * as schema from '../../db/schema.ts';
import { apiKeys, rateTiers } from '../../db/schema.ts';

/** What a change writes with: the first database, or a transaction on it. */
type Writer = PgDatabase<PostgresJsQueryResultHKT, typeof schema>;

/** The rows a change wrote, by primary key, to be copied to the other limiter databases. */
interface Touched {
  readonly tiers?: readonly string[];
  readonly keys?: readonly string[];
}

export interface KeyStore {
  /** The source of truth (the first limiter database, by their records), where keys and tiers are read. */
  readonly drizzle: Drizzle;
  /**
   * Makes a change with `write`, and copies the rows that `touched` names from the first database to every
   * other in order, each in a transaction that commits once all of them have the rows, before the change
   * commits on the first. Any failure before the commits (a database away) rolls it back everywhere: it is made
   * nowhere. Only a database that fails in its very commit leaves it half made (on some databases and not
   * on the others), which the same change sent again, or the next start-up (syncKeysAndTiers), puts right.
   */
  change<T>(write: (db: Writer) => Promise<T>, touched: (result: T) => Touched): Promise<T>;
}

type TierRow = typeof rateTiers.$inferSelect;
type KeyRow = typeof apiKeys.$inferSelect;

/** `excluded.<column>` of an upsert: the row as the first database has it. */
const excluded = (column: string) => sql.raw(`excluded.${column}`);

/** Writes `tiers` and `keys` as they are, created or overwritten, in that order (a key names its tier). */
async function copyRows(db: Writer, tiers: readonly TierRow[], keys: readonly KeyRow[]): Promise<void> {
  // In batches: a statement takes at most 65,535 parameters, and a key row has nine.
  for (let i = 0; i < tiers.length; i += 1000) {
    await db
      .insert(rateTiers)
      .values(tiers.slice(i, i + 1000))
      .onConflictDoUpdate({
        target: rateTiers.name,
        set: { allowance: excluded('allowance'), windowSeconds: excluded('window_seconds'), concurrency: excluded('concurrency') },
      });
  }
  for (let i = 0; i < keys.length; i += 1000) {
    await db
      .insert(apiKeys)
      .values(keys.slice(i, i + 1000))
      .onConflictDoUpdate({
        target: apiKeys.id,
        set: {
          keyHash: excluded('key_hash'),
          prefix: excluded('prefix'),
          name: excluded('name'),
          tier: excluded('tier'),
          createdAt: excluded('created_at'),
          revokedAt: excluded('revoked_at'),
          collections: excluded('collections'),
          claims: excluded('claims'),
        },
      });
  }
}

/** `databases` in the order of their records (Database.limiters): the first is the source of truth. */
export function keyStore(databases: readonly LimiterDatabase[]): KeyStore {
  const [first, ...others] = databases;
  if (others.length === 0) return { drizzle: first!.drizzle, change: (write) => write(first!.drizzle) };
  return {
    drizzle: first!.drizzle,
    change(write, touched) {
      return first!.drizzle.transaction(async (tx) => {
        const result = await write(tx);
        const { tiers = [], keys = [] } = touched(result);
        // Read back in this transaction: its row locks hold any other change of them until this one commits.
        const tierRows =
          tiers.length === 0
            ? []
            : await tx
                .select()
                .from(rateTiers)
                .where(inArray(rateTiers.name, [...tiers]));
        const keyRows =
          keys.length === 0
            ? []
            : await tx
                .select()
                .from(apiKeys)
                .where(inArray(apiKeys.id, [...keys]));
        await onEveryOther(others, (copy) => copyRows(copy, tierRows, keyRows));
        return result;
      });
    },
  };
}

/**
 * Runs `copy` in a transaction on each of `others`, one after another in their order (each holds the rows it
 * wrote, and their locks, before the next is asked: the order of the locks is the databases' order, at
 * every instance), and commits them only once it has succeeded on all of them: a database that fails (away,
 * or refusing) rolls back every one before it, and the rest are never asked. Settles once every transaction
 * has ended, rejecting with the first failure.
 */
async function onEveryOther(others: readonly LimiterDatabase[], copy: (db: Writer) => Promise<void>): Promise<void> {
  let decide!: { commit: () => void; abort: (error: unknown) => void };
  const decided = new Promise<void>((resolve, reject) => (decide = { commit: resolve, abort: reject }));
  decided.catch(() => {}); // each transaction awaits it, and fails with it
  const transactions: Promise<void>[] = [];
  let failure: { error: unknown } | undefined;
  for (const other of others) {
    const copied = new Promise<void>((resolve, reject) => {
      const transaction = other.drizzle.transaction(async (tx) => {
        await copy(tx);
        resolve();
        await decided;
      });
      transaction.catch(reject); // one that failed before or in its copy: the next is not asked
      transactions.push(transaction);
    });
    try {
      await copied;
    } catch (error) {
      failure = { error };
      break;
    }
  }
  if (failure === undefined) decide.commit();
  else decide.abort(failure.error);
  const outcomes = await Promise.allSettled(transactions);
  if (failure !== undefined) throw failure.error;
  const failed = outcomes.find((outcome) => outcome.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/**
 * Makes every other limiter database hold exactly the first one's keys and tiers (`databases` in the order of
 * their records: the first is the source of truth): run at start-up, it puts right what a change left half
 * made (KeyStore.change) and fills a limiter database just added. The first database's tables are locked
 * meanwhile against every change (and every other sync), which waits for the changes in flight, so nothing
 * written between the read and the copy is lost; the others are written one after another in their order,
 * the order in which changes lock them. Returns the identities of the databases that differed, and were so
 * written.
 */
export async function syncKeysAndTiers(databases: readonly LimiterDatabase[]): Promise<string[]> {
  const [first, ...others] = databases;
  if (others.length === 0) return [];
  return first!.drizzle.transaction(async (tx) => {
    await tx.execute(sql`lock table ${rateTiers}, ${apiKeys} in share row exclusive mode`);
    const tiers = await tx.select().from(rateTiers).orderBy(asc(rateTiers.name));
    const keys = await tx.select().from(apiKeys).orderBy(asc(apiKeys.id));
    const tierDigest = JSON.stringify(tiers);
    const keyDigest = digestOf(keys);
    const written: (string | undefined)[] = [];
    for (const other of others) {
      written.push(
        await other.drizzle.transaction(async (copy) => {
          const theirTiers = await copy.select().from(rateTiers).orderBy(asc(rateTiers.name));
          const theirKeys = await copy.select().from(apiKeys).orderBy(asc(apiKeys.id));
          if (JSON.stringify(theirTiers) === tierDigest && digestOf(theirKeys) === keyDigest) return undefined;
          await copyRows(copy, tiers, keys);
          const keyIds = new Set(keys.map((key) => key.id));
          const extraKeys = theirKeys.filter((key) => !keyIds.has(key.id));
          for (let i = 0; i < extraKeys.length; i += 1000) {
            await copy.delete(apiKeys).where(
              inArray(
                apiKeys.id,
                extraKeys.slice(i, i + 1000).map((key) => key.id),
              ),
            );
          }
          const extraTiers = theirTiers.length > tiers.length || theirTiers.some((tier) => !tiers.some((ours) => ours.name === tier.name));
          if (extraTiers)
            await copy.delete(rateTiers).where(
              notInArray(
                rateTiers.name,
                tiers.map((tier) => tier.name),
              ),
            );
          return other.identity;
        }),
      );
    }
    return written.filter((identity) => identity !== undefined);
  });
}

/** A comparable text of key rows (their hashes as hex). */
function digestOf(keys: readonly KeyRow[]): string {
  return JSON.stringify(keys.map((key) => ({ ...key, keyHash: key.keyHash.toString('hex') })));
}
