// A decision refused as read-only (SQLSTATE 25006: a primary being demoted) is sent once more, and never on the
// connection that refused it: even when the next statement was already due to go when the refusal was read
// (docs/explanation/faults.md, "A failover").
import type { Sql } from 'postgres';
import t from 'tap';
import type { OwnConnection } from '../../db/client.ts';
import { databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { scratchSession, testDatabase } from '../helpers/db.ts';
import { chargedUnits } from '../helpers/limiter.ts';

const anonymous = (address: string) => ({ keyHash: undefined, ipSubject: `ip:${address}`, ipTier: 'anonymous', cost: 1, clockOffset: 0 });

/** Holds this process's event loop for `ms`: what the socket receives meanwhile is read only afterwards. */
function hold(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

t.test('a decision is sent again on a fresh connection, even when the next statement was due before the refusal was read', async (t) => {
  const database = await testDatabase(t);
  // The first connection is read-only, as a demoted primary's are; the one that replaces it takes writes.
  const demoted = scratchSession(t, database.url, { fetch_types: false, connection: { default_transaction_read_only: true } });
  // Its decision statement is prepared by a decision refused on it, so that the next is one round trip.
  await t.rejects(databaseLimiter(demoted, 0).decide(anonymous('192.0.2.9')), { code: '25006' }, 'a demoted primary refuses decisions');
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
  let statements = 0;
  let second: Promise<unknown> | undefined;
  const limiter = databaseLimiter(connection, 0, 10_000, () => {
    statements++;
    if (statements !== 1) return;
    // Two turns on, the first statement is on the wire. A second decision is asked for in the next turn's
    // timers, before the refusal, which arrives while the loop is held, is read in the same turn: its
    // statement is then due to go, in that turn, on the connection that refused the first.
    setImmediate(() =>
      setImmediate(() => {
        setTimeout(() => {
          second = limiter.decide(anonymous('192.0.2.2'));
        }, 0);
        hold(200);
      }),
    );
  });
  const first = await limiter.decide(anonymous('192.0.2.1'));
  t.equal(first.outcome, 'ok', 'the first decision, refused as read-only, is made on the fresh connection');
  t.equal(((await second) as { outcome: string }).outcome, 'ok', 'and so is the second');
  t.equal(opened.length, 2, 'the connection was renewed once');
  t.equal(await chargedUnits(database.sql), 2, 'each decision charged once');
});
