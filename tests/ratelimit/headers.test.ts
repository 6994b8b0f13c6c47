// The headers never lie (docs/reference/headers.md, "Rate-limit headers"): a property test over random request sequences, costs and clock moves.
import fc from 'fast-check';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { limits, setTier } from '../helpers/limiter.ts';

// Paths of the demo products collection by cost (CostRule 50 items per unit, +1 per 10,000 rows skipped along the primary key).
const pathOfCost: Record<number, string> = {
  1: '/v1/products?count=none&limit=20',
  2: '/v1/products?count=none&limit=100',
  3: '/v1/products?count=none&limit=100&offset=10000',
};

type Action =
  | { kind: 'request'; cost: 1 | 2 | 3 }
  | { kind: 'advance'; seconds: number }
  | { kind: 'untilRetryAfter' }
  | { kind: 'untilReset' };

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('request' as const), cost: fc.constantFrom(1 as const, 2 as const, 3 as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('advance' as const), seconds: fc.double({ min: 0.05, max: 4, noNaN: true }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'untilRetryAfter' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'untilReset' as const }) },
);

interface Served {
  readonly start: number;
  readonly end: number;
  readonly units: number;
}

t.test('Remaining, Reset and Retry-After are promises the service keeps', async (t) => {
  // The headers are under test, not the 2.5 s deadline (tests/ratelimit/concurrency.test.ts and
  // db-down.test.ts test that): a machine that stalls for seconds (CI on two busy cores) must not turn a
  // decision into a 503 here.
  const api = await testApp(t, { rateLimit: { timeoutMs: 60_000 } });
  let run = 0;
  // The database clock as the app sees it: the real clock (same machine) plus the test offset.
  const now = () => Date.now() / 1000 + api.clock;

  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 2, max: 9 }),
      fc.integer({ min: 1, max: 4 }),
      fc.array(action, { minLength: 5, maxLength: 30 }),
      async (limit, windowSeconds, actions) => {
        run++;
        await setTier(api.database.sql, 'anonymous', { allowance: limit, windowSeconds, concurrency: 4 });
        const address = `10.${(run >> 8) & 255}.${run & 255}.1`; // a fresh client per run
        let promised = limit; // what the last response said could still be spent
        let last: { status: number; cost: number; reset: number; retryAfter?: number } | undefined;
        const served: Served[] = [];

        const send = async (cost: number) => {
          const start = now();
          const res = await api.request(pathOfCost[cost]!, { address });
          const end = now();
          const h = limits(res);
          if (cost > limit) {
            // More than the whole allowance: refused as such, whatever is left, and nothing charged.
            const body = await res.json();
            if (res.status !== 403 || body.code !== 'Cost_exceeds_allowance')
              throw new Error(`Cost ${cost} over ${limit}, yet ${res.status}`);
            if (h.remaining < promised) throw new Error('A refused request was charged');
            promised = h.remaining;
            return res.status;
          }
          const charged = cost;
          if (charged <= promised) {
            if (res.status !== 200) throw new Error(`Cost ${charged} within the promised ${promised}, yet ${res.status}`);
          }
          if (res.status === 200) {
            served.push({ start, end, units: charged });
            if (h.remaining < promised - charged) throw new Error(`Remaining fell by more than the cost`);
          } else if (res.status === 429) {
            const body = await res.json();
            if (body.code !== 'Request_limit_exceeded') throw new Error(`Unexpected ${body.code}`);
            if (!(h.retryAfter! >= 1)) throw new Error(`Retry-After ${h.retryAfter}`);
            // Retry-After counts from the current second and ends exactly at Reset, never past it. (Date.now()
            // is in whole milliseconds: `end` may read up to 1 ms before the database's clock did.)
            const second = h.reset - h.retryAfter!;
            if (second < Math.floor(start) - 1 || second > Math.floor(end + 0.001)) throw new Error(`Retry-After does not end at Reset`);
          } else {
            throw new Error(`Unexpected status ${res.status}`);
          }
          if (h.limit !== limit) throw new Error(`Limit ${h.limit}, expected ${limit}`);
          promised = h.remaining;
          last = { status: res.status, cost, reset: h.reset, retryAfter: h.retryAfter };
          return res.status;
        };

        for (const step of actions) {
          if (step.kind === 'request') await send(step.cost);
          else if (step.kind === 'advance') api.clock += step.seconds;
          else if (step.kind === 'untilRetryAfter' && last?.status === 429) {
            // "a request sent once Retry-After has passed is served"
            api.clock += Math.max(0, last.reset - now()) + 0.01;
            const status = await send(last.cost);
            if (status !== 200) throw new Error('Not served after Retry-After');
          } else if (step.kind === 'untilReset' && last?.status === 200) {
            // Success: Reset is when the whole allowance is back.
            api.clock += Math.max(0, last.reset - now()) + 0.01;
            promised = limit;
            await send(1);
          }
        }

        // No interval of the window's length ever holds more than the allowance of served units:
        // checked over every run of requests that certainly fell within one window.
        for (let i = 0; i < served.length; i++) {
          let units = 0;
          for (let j = i; j < served.length && served[j]!.end - served[i]!.start < windowSeconds; j++) {
            units += served[j]!.units;
            if (units > limit) throw new Error(`${units} units served within ${windowSeconds} s, limit ${limit}`);
          }
        }
      },
    ),
    { numRuns: 40, interruptAfterTimeLimit: 60_000, includeErrorInReport: true },
  );
  t.ok(run >= 10, `${run} random sequences checked`);
});
