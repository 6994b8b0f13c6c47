// The rate limiter's batch goes on the wire in the turn of the event loop it is sent in (lib/ratelimit/limiter.ts,
// flushAtOnce; db/driver.ts, writeWhenHanded), not a turn later, behind whatever the next poll reads: under a storm,
// every other client's request. Timed by the server's clock across a turn held on purpose.
import t from 'tap';
import { databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { scratchSession, serverClockMs, testDatabase } from '../helpers/db.ts';
import { anonymousInput, setTier } from '../helpers/limiter.ts';
import { holdEventLoop } from '../helpers/wait.ts';

const LEASE_TTL = 30;

t.test("a decision's statement runs while the rest of its turn holds the event loop", async (t) => {
  const database = await testDatabase(t);
  const sql = scratchSession(t, database.url);
  await setTier(sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 10 });
  const limiter = databaseLimiter(sql, LEASE_TTL);
  // The connection open and the decision's statement prepared, so that the measured one is only written and run.
  await limiter.decide(anonymousInput('192.0.2.1'));

  const held = 300;
  const address = '192.0.2.2';
  const lastClock = await new Promise<number>((resolve, reject) => {
    // A timer's callback, as a request's would be a poll's: the limiter sends its batch from a setImmediate callback
    // of this turn, and the one below, queued after it, holds the loop once it has.
    setTimeout(() => {
      const decided = limiter.decide(anonymousInput(address));
      setImmediate(() => {
        holdEventLoop(held);
        Promise.all([decided, serverClockMs(sql)]).then(([decision, ms]) => {
          if (decision.outcome !== 'ok') reject(new Error(`Decided ${decision.outcome}`));
          else resolve(ms);
        }, reject);
      });
    }, 0);
  });
  // The lease's expiry is the decision's clock (clock_timestamp, no offset) plus the lease's time to live.
  const [row] = await sql<{ expires: number }[]>`
    select lease_expires[1] as expires from paginated_collections.rate_windows where subject = ${`ip:${address}`}`;
  const decidedBefore = lastClock - (row!.expires - LEASE_TTL) * 1000;
  t.ok(
    decidedBefore >= held * 0.8,
    `decided while the loop was held: ${decidedBefore.toFixed(1)} ms before the statement sent after the hold (held ${held} ms)`,
  );
});
