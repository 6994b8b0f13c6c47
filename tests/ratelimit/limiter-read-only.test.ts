// A decision refused as read-only (SQLSTATE 25006: a primary being demoted) is sent once more, and never on the
// connection that refused it: even when the next statement was already due to go when the refusal was read
// (docs/explanation/faults.md, "A failover").
import type { Sql } from 'postgres';
import t from 'tap';
import type { OwnConnection } from '../../db/client.ts';
import { type Decision, databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { scratchSession, testDatabase } from '../helpers/db.ts';
import { anonymousInput, chargedUnits } from '../helpers/limiter.ts';
import { holdEventLoop } from '../helpers/wait.ts';

t.test('a decision is sent again on a fresh connection, even when the next statement was due before the refusal was read', async (t) => {
  const database = await testDatabase(t);
  // The first connection is read-only, as a demoted primary's are; the one that replaces it takes writes.
  const demoted = scratchSession(t, database.url, { fetch_types: false, connection: { default_transaction_read_only: true } });
  // Its decision statement is prepared by a decision refused on it, so that the next is one round trip.
  await t.rejects(
    databaseLimiter(demoted, 0).decide(anonymousInput('192.0.2.9')),
    { code: '25006' },
    'a demoted primary refuses decisions',
  );
  const opened: Sql[] = [demoted];
  const connection: OwnConnection = {
    get sql() {
      return opened.at(-1)!;
    },
    deadlineMs: 10_000,
    pipelining: true,
    renew(stale) {
      if (stale === opened.at(-1)) opened.push(scratchSession(t, database.url, { fetch_types: false }));
    },
  };
  // The limiter's table held locked by a session that the server ends 700 ms after it took the lock: the first
  // decision's statement waits on the wire until then, and is refused then, by the server's clock alone.
  const holder = scratchSession(t, database.url, { connection: { idle_in_transaction_session_timeout: 700 } });
  await holder`begin`;
  await holder`lock table paginated_collections.rate_windows in access exclusive mode`;
  /** For each statement sent, whether it went on the demoted connection. */
  const onDemoted: boolean[] = [];
  const limiter = databaseLimiter(connection, 0, 10_000, () => onDemoted.push(connection.sql === demoted));
  const first = limiter.decide(anonymousInput('192.0.2.1'));
  first.catch(() => {}); // awaited below
  // While it waits, a second decision is asked for, and the loop is held past the refusal's arrival: the next
  // turn reads the refusal, and then the second decision's statement, already due, goes.
  let second!: Promise<Decision>;
  await new Promise<void>((resolve) =>
    setTimeout(() => {
      second = limiter.decide(anonymousInput('192.0.2.2'));
      holdEventLoop(1_500);
      resolve();
    }, 200),
  );
  t.equal((await first).outcome, 'ok', 'the first decision, refused as read-only, is made on the fresh connection');
  t.equal((await second).outcome, 'ok', 'and so is the second');
  // The race was met: had the second decision gone out before the refusal was read, it would have been a second
  // statement on the demoted connection.
  t.same(onDemoted, [true, false], 'one statement on the demoted connection, then one with both decisions on the fresh one');
  t.equal(opened.length, 2, 'the connection was renewed once');
  t.equal(await chargedUnits(database.sql), 2, 'each decision charged once');
});
