// rate_decide's fast path for a batch of one subject (db/functions/rate_decide.sql; since migration 0002) decides
// exactly as its general path: random steps of decisions and releases go, as one statement each, to one
// subject alone (the fast path) and, alike, to a second subject with a bystander beside it in every
// statement (the general path, which joins and sorts several subjects); the answers must be the same.
import fc from 'fast-check';
import t from 'tap';
import { hashKey } from '../../lib/ratelimit/identity.ts';
import { type Decision, databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';

type Lease = NonNullable<Decision['lease']>;

interface Step {
  /** The cost of each decision of the statement. */
  readonly costs: number[];
  /** Whether the statement also ends every lease the subject holds. */
  readonly release: boolean;
  /** Whole seconds the clock moves before the statement. */
  readonly advance: number;
}

const step: fc.Arbitrary<Step> = fc.record({
  costs: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 4 }),
  release: fc.boolean(),
  advance: fc.integer({ min: 0, max: 6 }),
});

/** What both paths must agree on; the key id and the subject name differ by construction. */
function answer(decision: Decision) {
  const { outcome, tier, allowance, windowSeconds, remaining, reset, retryAfter, now, lease } = decision;
  return { outcome, tier, allowance, windowSeconds, remaining, reset, retryAfter, now, slot: lease?.slot, token: lease?.token };
}

t.test('a batch of one subject is decided as the general path decides it', async (t) => {
  const database = await testDatabase(t);
  const sql = database.sql;
  await setTier(sql, 'same', { allowance: 7, windowSeconds: 4, concurrency: 2 });
  await setTier(sql, 'anonymous', { allowance: 7, windowSeconds: 4, concurrency: 2 });
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.constantFrom('ip', 'key', 'unknown key'), fc.array(step, { minLength: 3, maxLength: 12 }), async (kind, steps) => {
      run++;
      // Two clients of the same kind, fresh in each run: `fast` alone in its statements, `general` with a bystander.
      const client = async (name: string) => {
        const hash = hashKey(`pck_${name}_${run}`);
        if (kind === 'key')
          await sql`insert into paginated_collections.api_keys (id, key_hash, prefix, tier) values (${`key_${name}_${run}`}, ${hash}, 'pck_', 'same')`;
        return { keyHash: kind === 'ip' ? undefined : hash, ipSubject: `ip:10.${run >> 8}.${run & 255}.${name === 'fast' ? 1 : 2}` };
      };
      const fast = { ...(await client('fast')), held: [] as Lease[], subject: '' };
      const general = { ...(await client('general')), held: [] as Lease[], subject: '' };
      const limiter = databaseLimiter(sql, 5);
      let offset = 0;
      for (const { costs, release, advance } of steps) {
        offset += advance;
        // Both statements of a step within one second of the database clock (and so of one bucket): the
        // step starts early in a second, moving the clock on where need be.
        const [row] = await sql`select extract(epoch from clock_timestamp())::float8 as now`;
        if ((Number(row!.now) + offset) % 1 > 0.4) offset += 0.7;
        const statement = async (who: typeof fast, bystander: boolean) => {
          const input = (cost: number) => ({
            keyHash: who.keyHash,
            ipSubject: who.ipSubject,
            ipTier: 'anonymous',
            cost,
            clockOffset: offset,
          });
          const ending = release ? who.held.splice(0) : [];
          const [decisions] = await Promise.all([
            Promise.all(costs.map((cost) => limiter.decide(input(cost)))),
            Promise.all(ending.map((lease) => limiter.release(who.subject, lease))),
            bystander
              ? limiter.decide({ keyHash: undefined, ipSubject: 'ip:192.0.2.200', ipTier: 'anonymous', cost: 1, clockOffset: offset })
              : null,
          ]);
          for (const decision of decisions) {
            who.subject = decision.subject;
            if (decision.lease) who.held.push(decision.lease);
          }
          return decisions.map(answer);
        };
        const alone = await statement(fast, false);
        const beside = await statement(general, true);
        if (JSON.stringify(alone) !== JSON.stringify(beside)) {
          throw new Error(`${kind}: one subject alone ${JSON.stringify(alone)}, beside another ${JSON.stringify(beside)}`);
        }
      }
    }),
    { numRuns: 30, interruptAfterTimeLimit: 60_000, includeErrorInReport: true },
  );
  t.ok(run >= 10, `${run} random sequences checked`);
});
