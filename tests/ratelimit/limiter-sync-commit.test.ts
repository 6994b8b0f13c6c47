// LIMITER_SYNCHRONOUS_COMMIT: the limiter's decisions commit with the synchronous_commit it names, and by default
// asynchronously (docs/explanation/rate-limit.md, "Asynchronous commit"). On a private cluster whose WAL writer
// sleeps 10 s, an asynchronous commit's WAL stays unflushed once the decision is answered, a synchronous one's is
// flushed by then: the WAL's flush position, read at once after each answer, says which the decision had.
import t, { type Test } from 'tap';
import { openDatabase, type SynchronousCommit } from '../../db/client.ts';
import { runMigrations } from '../../db/migrate.ts';
import { databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { startCluster } from '../helpers/cluster.ts';
import { scratchSession } from '../helpers/db.ts';
import { anonymousInput } from '../helpers/limiter.ts';

const cluster = await startCluster(t, { wal_writer_delay: "'10s'", autovacuum: 'off' });
await runMigrations(cluster.url());
const watch = scratchSession(t, cluster.url());

/** For each of `count` decisions through a limiter whose connection commits with `commit`: whether its WAL was flushed when it was answered. */
async function flushedOnAnswer(t: Test, commit: SynchronousCommit | undefined, count: number): Promise<boolean[]> {
  const database = openDatabase(cluster.url(), commit === undefined ? {} : { limiterSynchronousCommit: commit });
  try {
    const limiter = databaseLimiter(database.limiter, 0);
    const flushed: boolean[] = [];
    for (let i = 0; i < count; i++) {
      const decision = await limiter.decide({
        keyHash: undefined,
        ipSubject: `ip:192.0.2.${i}`,
        ipTier: 'anonymous',
        cost: 1,
        clockOffset: 0,
      });
      t.equal(decision.outcome, 'ok', `decision ${i + 1} admitted`);
      const [row] = await watch`select pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() as flushed`;
      flushed.push(row!.flushed as boolean);
    }
    return flushed;
  } finally {
    await database.close();
  }
}

t.test('by default, a decision is answered before its WAL is flushed', async (t) => {
  const flushed = await flushedOnAnswer(t, undefined, 10);
  t.same(flushed.filter(Boolean), [], 'not one flushed when answered: asynchronous commit');
});

t.test('off, named, is the default', async (t) => {
  t.same((await flushedOnAnswer(t, 'off', 5)).filter(Boolean), []);
});

for (const commit of ['local', 'on'] as const) {
  t.test(`LIMITER_SYNCHRONOUS_COMMIT=${commit}: a decision is answered once its WAL is flushed`, async (t) => {
    t.same(await flushedOnAnswer(t, commit, 10), Array(10).fill(true), 'every one flushed when answered');
  });
}

t.test(
  "and the setting holds the decision's transaction only: a statement after it on the same connection commits as before",
  async (t) => {
    const database = openDatabase(cluster.url(), { limiterSynchronousCommit: 'on' });
    t.teardown(() => database.close());
    const limiter = databaseLimiter(database.limiter, 0);
    await limiter.decide(anonymousInput('192.0.2.200'));
    const [row] = await database.limiter.sql`select current_setting('paginated_collections.limiter_synchronous_commit', true) as level,
    current_setting('synchronous_commit') as commit`;
    t.same(row, { level: '', commit: 'off' }, "the connection's own settings, the cluster's synchronous_commit = off");
  },
);
