// How a busy subject's rate_windows row is stored (db/migrations/0005_rate_windows_toast_target.sql): a row
// past PostgreSQL's default of 2,032 bytes and under 4,000 is written back uncompressed at every statement,
// not compressed again each time; a row past 4,000 is compressed, so that two versions still fit in a page
// and every rewrite stays a HOT update.
import postgres, { type Sql } from 'postgres';
import t from 'tap';
import { runMigrations } from '../../db/migrate.ts';
import { startCluster } from '../helpers/cluster.ts';
import { testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { waitFor } from '../helpers/wait.ts';

const SUBJECT = 'ip:203.0.113.9';

/** A lease as rate_decide returns it, with its decision's reset (the expiry of the bucket it charged). */
interface Lease {
  readonly slot: number | null;
  readonly token: number | null;
  readonly reset: number;
}

/** `count` decisions for SUBJECT in one statement, leases of `ttl` seconds (0: none), the clock moved by `ahead`. */
async function decideLeases(sql: Sql, count: number, ttl: number, ahead = 0): Promise<Lease[]> {
  return (await sql`
    select lease_slot as slot, lease_token as token, reset::int from paginated_collections.rate_decide(array_fill(null::text, array[${count}::int]),
      array_fill(${SUBJECT}::text, array[${count}::int]), array_fill('anonymous'::text, array[${count}::int]),
      array_fill(1, array[${count}::int]), array_fill(${ahead}::float8, array[${count}::int]), ${ttl}::int,
      '{}'::text[], '{}'::int[], '{}'::bigint[], '{}'::int[], '{}'::bigint[])
    where outcome = 'ok'`) as unknown as Lease[];
}

/** Releases `leases` in one rate_release, each giving back `refund` units (a 304's) to its decision's bucket. */
async function releaseLeases(sql: Sql, leases: readonly Lease[], refund = 0): Promise<void> {
  const list = (values: readonly unknown[]) => `{${values.join(',')}}`;
  await sql`select paginated_collections.rate_release(${list(leases.map(() => `"${SUBJECT}"`))}::text[], ${list(leases.map((lease) => lease.slot))}::int[],
    ${list(leases.map((lease) => lease.token))}::bigint[], ${list(leases.map(() => refund))}::int[],
    ${list(leases.map((lease) => lease.reset))}::bigint[])`;
}

t.test('a subject with many lease slots keeps its row uncompressed up to 4,000 bytes', async (t) => {
  // On a private cluster: on the shared test server, the transactions of the test files running beside this
  // one, in their own databases, hold back every snapshot's xmin, and with it how far PostgreSQL may prune
  // dead row versions from a page, so that a rewrite that would be HOT is not (6 or 7 of 10 with six runs at
  // once).
  const cluster = await startCluster(t, { autovacuum: 'off' });
  await runMigrations(cluster.url());
  const sql = postgres(cluster.url(), { max: 4, onnotice: () => {} });
  t.teardown(() => sql.end());
  await setTier(sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 60, concurrency: 1_000 });

  /** `count` decisions for SUBJECT in one statement, each taking a lease of an hour. */
  const decide = (count: number) => sql`
    select count(*)::int as n from paginated_collections.rate_decide(array_fill(null::text, array[${count}::int]),
      array_fill(${SUBJECT}::text, array[${count}::int]), array_fill('anonymous'::text, array[${count}::int]),
      array_fill(1, array[${count}::int]), array_fill(0::float8, array[${count}::int]), 3600,
      '{}'::text[], '{}'::int[], '{}'::bigint[], '{}'::int[], '{}'::bigint[])
    where outcome = 'ok'`;
  const stored = async () => {
    const [row] = await sql`
      select cardinality(lease_tokens) as slots, pg_column_size(w.*) as row_bytes,
             pg_column_size(lease_tokens) as tokens_bytes, pg_column_size(lease_expires) as expires_bytes
        from paginated_collections.rate_windows w where subject = ${SUBJECT}`;
    return row as { slots: number; row_bytes: number; tokens_bytes: number; expires_bytes: number };
  };
  // An array of n 8-byte elements, stored as it is: a 24-byte header (no nulls, one dimension) and the elements.
  const plain = (n: number) => 24 + 8 * n;

  const [first] = await decide(200);
  t.equal(first!.n, 200, '200 leases taken in one statement');
  let row = await stored();
  t.equal(row.slots, 200, 'the subject has 200 slots');
  t.ok(row.row_bytes > 2032 && row.row_bytes < 4000, `its row (${row.row_bytes} bytes) is past the default threshold, under 4,000`);
  t.equal(row.tokens_bytes, plain(200), 'lease_tokens is stored uncompressed');
  t.equal(row.expires_bytes, plain(200), 'lease_expires is stored uncompressed');

  // Written back again by a later statement (an UPDATE of the existing row): still as it is.
  const [again] = await decide(1);
  t.equal(again!.n, 1, 'one more lease taken');
  row = await stored();
  t.equal(row.slots, 201, 'the subject has 201 slots');
  t.equal(row.tokens_bytes, plain(201), 'lease_tokens is still uncompressed after the rewrite');

  // Past 4,000 bytes the row is compressed again, so that two versions of it fit in one 8 KB page.
  await decide(150);
  row = await stored();
  t.equal(row.slots, 351, 'the subject has 351 slots');
  t.ok(row.row_bytes <= 4000, `a row that would be ${plain(351) * 2} bytes of lease arrays alone is stored in ${row.row_bytes}`);
  t.ok(row.tokens_bytes < plain(351), `lease_tokens is compressed past 4,000 bytes (${row.tokens_bytes} bytes)`);

  // Why 4,000 and not more: uncompressed, this row would leave no room in its page for its next version, and
  // no rewrite of it would be HOT (with toast_tuple_target 8,160, none of them is). Each rewrite finds room
  // once the page's dead version is pruned, which PostgreSQL does when it reads the page, unless another
  // process holds the page at that instant (the background writer, say): ten rewrites, at least eight of
  // them HOT, in one of three attempts. Counted on one connection, whose statistics are flushed on request
  // (pg_stat_force_next_flush, when it goes idle).
  const one = await sql.reserve();
  t.teardown(() => one.release());
  const updates = async () => {
    await one`select pg_stat_force_next_flush()`;
    const [counts] =
      await one`select n_tup_upd::int as all, n_tup_hot_upd::int as hot from pg_stat_user_tables where relname = 'rate_windows'`;
    return counts as { all: number; hot: number };
  };
  const hotOfTen: number[] = [];
  while (hotOfTen.length < 3 && !hotOfTen.some((hot) => hot >= 8)) {
    const before = await updates();
    for (let i = 0; i < 10; i++)
      await one`select count(*) from paginated_collections.rate_decide('{NULL}'::text[], ${`{"${SUBJECT}"}`}::text[], '{anonymous}'::text[], '{1}'::int[], '{0}'::float8[], 0, '{}'::text[], '{}'::int[], '{}'::bigint[], '{}'::int[], '{}'::bigint[])`;
    const after = await waitFor('the ten rewrites to be counted', updates, {
      until: (counts) => counts.all >= before.all + 10,
      timeoutMs: 5_000,
    });
    t.equal(after.all - before.all, 10, 'ten rewrites of the row');
    hotOfTen.push(after.hot - before.hot);
  }
  t.ok(
    hotOfTen.some((hot) => hot >= 8),
    `at least 8 of 10 rewrites HOT, in one of three attempts: ${hotOfTen.join(', ')}`,
  );
});

t.test("released slots at the end of a subject's arrays are dropped when rate_decide writes its row", async (t) => {
  const database = await testDatabase(t);
  const sql = database.sql;
  await setTier(sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 60, concurrency: 1_000 });

  const decide = (count: number, ttl: number, ahead = 0) => decideLeases(sql, count, ttl, ahead);
  const release = (leases: readonly Lease[]) => releaseLeases(sql, leases);
  const stored = async () => {
    const [row] = await sql`
      select cardinality(lease_tokens) as slots, cardinality(lease_expires) as expiries, lease_seq::int as seq,
             pg_column_size(lease_tokens) as tokens_bytes
        from paginated_collections.rate_windows where subject = ${SUBJECT}`;
    return row as { slots: number; expiries: number; seq: number; tokens_bytes: number };
  };

  const leases = await decide(300, 3600);
  t.same(
    leases.map((lease) => lease.slot),
    Array.from({ length: 300 }, (_, i) => i + 1),
    'slots 1 to 300 taken',
  );
  await release(leases.slice(100));
  t.equal((await stored()).slots, 300, 'releases alone leave the arrays as they are');

  await decide(1, 0);
  let row = await stored();
  t.same([row.slots, row.expiries], [100, 100], 'the next decision writes the row with the 100 slots up to the last lease held');
  t.equal(row.tokens_bytes, 24 + 8 * 100, 'a row that small is stored uncompressed');

  await release([leases[49]!]);
  await decide(1, 0);
  t.equal((await stored()).slots, 100, 'a slot released below a held one stays');
  const seq = (await stored()).seq;
  await release([leases[149]!]);
  await decide(1, 0);
  row = await stored();
  t.same([row.slots, row.seq], [100, seq], 'a release sent again for a dropped slot finds nothing and changes nothing');
  const [again] = await decide(1, 3600);
  t.equal(again!.slot, 50, 'the lowest free slot is taken first');
  await release([again!, ...leases.slice(0, 49), ...leases.slice(50, 100)]);
  await decide(1, 0);
  t.equal((await stored()).slots, 0, 'every lease released: no slot kept');

  // A lease that expired without its release keeps its slot for a minute: the release may still come, and
  // bring a 304's units back.
  const [brief] = await decide(1, 1);
  t.equal(brief!.slot, 1);
  await decide(1, 0, 10);
  t.equal((await stored()).slots, 1, 'an expired lease, not released, keeps its slot');
  await release([brief!]);
  await decide(1, 0, 10);
  t.equal((await stored()).slots, 0, 'once released, it is dropped');
});

t.test('slots at the end whose lease expired a minute ago are dropped, released or not', async (t) => {
  const database = await testDatabase(t);
  const sql = database.sql;
  // An hour's window: the units charged at the start still count at the end, so a refund could still apply.
  await setTier(sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 3600, concurrency: 1_000 });
  const decide = (count: number, ttl: number, ahead = 0) => decideLeases(sql, count, ttl, ahead);
  const stored = async () => {
    const [row] =
      await sql`select cardinality(lease_tokens) as slots, used::int from paginated_collections.rate_windows where subject = ${SUBJECT}`;
    return row as { slots: number; used: number };
  };

  // 300 leases whose releases never come (their instance stopped), then one held for an hour above them.
  const abandoned = await decide(300, 1);
  const [held] = await decide(1, 3600);
  t.equal(held!.slot, 301, 'the held lease takes slot 301');
  await decide(1, 0, 59);
  t.equal((await stored()).slots, 301, 'within the minute after their expiry every slot stays');
  await decide(1, 0, 62);
  t.equal((await stored()).slots, 301, 'a held lease keeps the expired slots below it');
  const [reused] = await decide(1, 3600, 62);
  t.equal(reused!.slot, 1, 'an expired slot is taken again, the lowest first');

  // The held lease ends; a minute after the others expired, the slots above the one still held go.
  await releaseLeases(sql, [held!]);
  await decide(1, 0, 62);
  t.equal((await stored()).slots, 1, 'only the slot of the lease still held is kept');

  // A release of a dropped slot's lease, sent far too late with a 304's units, finds nothing to give back.
  const before = await stored();
  const late = abandoned[9]!;
  await releaseLeases(sql, [late], 1);
  t.same(await stored(), before, 'nothing changes: no slot, no refund');
});
