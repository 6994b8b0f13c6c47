// rate_decide's count of the leases in flight (db/functions/rate_decide.sql; since migration 0004): counted once
// per subject and batch, then kept by each decision and release, and counted again when the clock reaches
// the earliest expiry counted or goes back. Checked against a model of the cap over random statements of
// releases (live, stale and repeated ones) and decisions, each decision at its own clock, on a clock frozen
// by the test, so that every lease expiry is decided exactly, never by how fast the statements ran.
import fc from 'fast-check';
import t from 'tap';
import { scratchSession, testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';

const CAP = 3;
const TTL = 4;

interface Step {
  /** Per decision: seconds its clock is ahead of the statement's (clock offsets may differ in a batch). */
  readonly decisions: number[];
  /** Which held leases the statement releases, by position (modulo how many are held). */
  readonly releases: number[];
  /** Also release again a lease released before (it must free nothing). */
  readonly stale: boolean;
  /** Seconds the frozen clock moves before the statement. */
  readonly advance: number;
}

const step: fc.Arbitrary<Step> = fc.record({
  decisions: fc.array(fc.constantFrom(0, 0, 0, 1, 3, 5, -2), { minLength: 0, maxLength: 6 }),
  releases: fc.array(fc.nat(10), { maxLength: 4 }),
  stale: fc.boolean(),
  advance: fc.constantFrom(0, 0, 1, 2, 3, 4, 5),
});

interface Lease {
  readonly slot: number;
  readonly token: string;
  /** The model's expiry: the decision's clock plus the TTL; 0 once released. */
  expires: number;
}

const literal = (values: readonly (string | number | null)[]) =>
  `{${values.map((value) => (value === null ? 'NULL' : String(value))).join(',')}}`;

t.test('the cap counts exactly the leases in flight, through releases, expiries and clocks that differ', async (t) => {
  const database = await testDatabase(t);
  const sql = database.sql;
  await setTier(sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 60, concurrency: CAP });
  // The clock rate_decide reads, frozen at `test.now` (Unix seconds) for this connection only: its schema comes
  // before pg_catalog on the search path, so the function's unqualified clock_timestamp() is this one.
  await sql`create schema frozen`;
  await sql`create function frozen.clock_timestamp() returns timestamptz language sql stable
              as $$ select to_timestamp(current_setting('test.now')::float8) $$`;
  const frozen = scratchSession(t, database.url, { connection: { search_path: 'frozen, pg_catalog, public' } });

  let run = 0;
  let decided = 0;
  let declined = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 2, maxLength: 14 }), async (steps) => {
      run++;
      const subject = `ip:198.51.100.${run}`;
      let now = 2_000_000_000 + run * 1000;
      const held: Lease[] = [];
      const released: Lease[] = [];
      for (const { decisions, releases, stale, advance } of steps) {
        now += advance;
        // The releases of this statement, each lease once; a stale one is one released before.
        const ending = [...new Set(releases.map((at) => held[at % Math.max(held.length, 1)]).filter((lease) => lease !== undefined))];
        const repeated = stale && released.length > 0 ? [released[released.length - 1]!] : [];
        const sent = [...ending, ...repeated];
        await frozen`select set_config('test.now', ${String(now)}, false)`;
        const answers = await frozen.unsafe(
          `select * from paginated_collections.rate_decide($1::text[], $2::text[], $3::text[], $4::int[], $5::float8[], ${TTL}, $6::text[], $7::int[], $8::bigint[]) order by idx`,
          [
            literal(decisions.map(() => null)),
            literal(decisions.map(() => subject)),
            literal(decisions.map(() => 'anonymous')),
            literal(decisions.map(() => 1)),
            literal(decisions),
            literal(sent.map(() => subject)),
            literal(sent.map((lease) => lease.slot)),
            literal(sent.map((lease) => lease.token)),
          ],
        );
        // The model: releases first, then each decision in order at its own clock.
        for (const lease of ending) {
          lease.expires = 0;
          held.splice(held.indexOf(lease), 1);
          released.push(lease);
        }
        if (decisions.length === 0) continue;
        if (answers.length !== decisions.length) throw new Error(`${decisions.length} decisions, ${answers.length} rows`);
        decisions.forEach((ahead, at) => {
          const clock = now + ahead;
          const inFlight = held.filter((lease) => lease.expires > clock).length;
          const answer = answers[at]!;
          const expected = inFlight >= CAP ? 'concurrency' : 'ok';
          decided++;
          if (answer.outcome !== expected) {
            throw new Error(
              `step at ${now}, decision ${at + 1} at +${ahead} s: ${inFlight} in flight of ${CAP}, expected ${expected}, got ${answer.outcome}`,
            );
          }
          if (expected === 'concurrency') {
            declined++;
            return;
          }
          // The slot it takes must be free in the model: never one that a lease in flight holds.
          const slot = answer.lease_slot as number;
          if (held.some((lease) => lease.slot === slot && lease.expires > clock)) {
            throw new Error(`decision ${at + 1}: slot ${slot} given while a lease in flight holds it`);
          }
          for (const lease of held.filter((lease) => lease.slot === slot)) held.splice(held.indexOf(lease), 1);
          held.push({ slot, token: String(answer.lease_token), expires: clock + TTL });
        });
      }
      // A subject never has more slots than it ever had leases at once: slots are reused.
      const [row] =
        await sql`select cardinality(lease_expires) as slots from paginated_collections.rate_windows where subject = ${subject}`;
      if (row !== undefined && (row.slots as number) > CAP) throw new Error(`${row.slots} slots for a cap of ${CAP}`);
    }),
    { numRuns: 60, interruptAfterTimeLimit: 60_000, includeErrorInReport: true },
  );
  t.ok(run >= 20, `${run} random sequences checked`);
  t.ok(decided > 100 && declined > 10, `${decided} decisions checked, ${declined} of them over the cap`);
});
