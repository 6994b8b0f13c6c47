// `npm run collections -- check`: a key the file names, where no unique index vouches for it (a view's, or a table's
// other than its own), tested for uniqueness against the rows, when there are few enough to count
// (docs/reference/collections-file.md, "Tools"). A key two rows share serves one of them and skips the other at
// every chunk boundary between them, and the catalog cannot tell.
import type { Sql } from 'postgres';
import { qualifiedName } from '../lib/catalog/model.ts';
import type { Collection } from '../lib/collections/model.ts';

/** Rows past which check does not count (the planner's estimate): a count of more would make check a long wait. */
export const KEY_TEST_ROWS = 1_000_000;
/** How long the count may take (a view's query may cost more than its rows say). */
export const KEY_TEST_SECONDS = 10;
/** Most values of a key that is not unique a problem names. */
const SHOWN = 3;

export type KeyTest =
  | { readonly outcome: 'unique' }
  | { readonly outcome: 'not unique'; readonly problem: string }
  | { readonly outcome: 'untested'; readonly reason: string };

/**
 * Whether check tests the collection's key: one the file names, over a view or materialized view (whose rows no
 * constraint holds to it) or over a table with no unique index within the key's columns (the key's NOT NULL the
 * file check already asks of a table).
 */
export function keyToTest(collection: Collection): boolean {
  const { key, relation } = collection;
  if (key.source !== 'file') return false;
  if (relation.kind === 'view' || relation.kind === 'materialized view') return true;
  return !relation.indexes.some(
    (index) =>
      index.unique && !index.partial && index.columns.every((column) => column.column !== undefined && key.columns.includes(column.column)),
  );
}

/** The key tested on `sql`'s database, in a read-only transaction under a statement timeout. */
export async function testKey(sql: Sql, collection: Collection): Promise<KeyTest> {
  const { relation, key } = collection;
  const from = `${quote(relation.schema)}.${quote(relation.name)}`;
  const columns = key.columns.map(quote);
  try {
    return await sql.begin('read only', async (tx) => {
      await tx.unsafe(`set local statement_timeout = '${KEY_TEST_SECONDS}s'`);
      const [plan] = await tx.unsafe(`explain (format json) select 1 from ${from}`);
      const estimate = Math.round((plan!['QUERY PLAN'] as { Plan: { 'Plan Rows': number } }[])[0]!.Plan['Plan Rows']);
      if (estimate > KEY_TEST_ROWS) {
        return { outcome: 'untested', reason: `the planner estimates ${estimate} rows, over the ${KEY_TEST_ROWS} check counts` } as const;
      }
      const texts = columns.map((column) => `${column}::text`).join(', ');
      // Rows with a NULL in the key are told apart: GROUP BY puts them together, as no key would.
      const nullable = columns.map((column) => `${column} is null`).join(' or ');
      const shared = `"#n" > 1 and not (${nullable})`;
      const [row] = await tx.unsafe(
        `with g as (select ${columns.join(', ')}, count(*) as "#n" from ${from} group by ${columns.join(', ')})
         select count(*) filter (where ${shared})::bigint::text as keys,
                coalesce(sum("#n") filter (where ${shared}), 0)::bigint::text as rows,
                coalesce(sum("#n") filter (where ${nullable}), 0)::bigint::text as nulls,
                (select coalesce(json_agg(json_build_array(json_build_array(${texts}), e."#n"::text)), '[]')
                   from (select * from g where ${shared} order by "#n" desc, ${columns.join(', ')} limit ${SHOWN}) e) as shown
           from g`,
      );
      const { keys, rows, nulls, shown } = row as unknown as {
        keys: string;
        rows: string;
        nulls: string;
        shown: [(string | null)[], string][];
      };
      const problems: string[] = [];
      const named = key.columns.join(', ');
      if (keys !== '0') {
        const values = shown.map(([value, n]) => `${value.length === 1 ? String(value[0]) : `(${value.join(', ')})`}: ${n} rows`);
        const more = BigInt(keys) > BigInt(shown.length) ? ', …' : '';
        problems.push(
          `key ${named} is not unique: ${rows} rows of ${qualifiedName(relation)} share ${keys} of its values (${values.join(', ')}${more}); ` +
            'a key names the columns that identify a row',
        );
      }
      if (nulls !== '0')
        problems.push(`key ${named} is NULL in ${nulls} rows of ${qualifiedName(relation)}: a key's columns are never NULL`);
      if (problems.length > 0) return { outcome: 'not unique', problem: problems.join('; ') } as const;
      return { outcome: 'unique' } as const;
    });
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    if (code === '57014') return { outcome: 'untested', reason: `counting its rows took over ${KEY_TEST_SECONDS} s` };
    return { outcome: 'untested', reason: `counting its rows failed: ${message.split('\n')[0]}` };
  }
}

/** check's report line of a tested key. */
export function keyLine(test: KeyTest): string | undefined {
  if (test.outcome === 'unique') return 'key: tested: no two rows share it, and it is never NULL';
  if (test.outcome === 'untested') return `key: not tested for uniqueness: ${test.reason}; walk counts the rows it misses`;
  return undefined;
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
