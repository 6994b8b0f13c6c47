// A request's statement budget (lib/ratelimit/budget.ts; docs/explanation/budgets.md, "Statement budgets"): its share of what
// its client had, a third kept back for the cancel's lag, never less than the floor nor its own units, and never
// a share of what the client's other requests in flight may still be charged for their time; and a request whose
// client's requests in flight already used what it has left waits for them, then runs or is declined.
import t from 'tap';
import { Flights, RequestBudget } from '../../lib/ratelimit/budget.ts';

/** The part of what a client has left that budgets share out: the rest is kept for the cancel's lag. */
const SHARED = 2 / 3;

t.test("a share of what the client had before its charge, among the tier's requests in flight", async (t) => {
  // A free key: 600 units, 8 in flight, a 1-unit chunk: two thirds of 600 ÷ 8, at 2 ms a unit.
  t.equal(new RequestBudget(1, 599, 8).timeoutMs(), 100);
  // Its own units where they are more than the share; the floor where both are less.
  t.equal(new RequestBudget(400, 100, 8).timeoutMs(), 800);
  t.equal(new RequestBudget(1, 9, 4).timeoutMs(), 50);
  // What its statements used comes off what is left, down to the floor.
  const budget = new RequestBudget(1, 599, 8);
  budget.used(30);
  t.equal(budget.timeoutMs(), 70);
  budget.used(80);
  t.equal(budget.timeoutMs(), 50);
});

t.test('eight requests admitted at once from a full window stay within the allowance together, the lag kept back', async (t) => {
  const admitted: RequestBudget[] = [];
  for (let i = 0; i < 8; i++) admitted.push(new RequestBudget(1, 600 - (i + 1), 8, [...admitted]));
  const total = admitted.reduce((sum, budget) => sum + budget.timeoutMs(), 0);
  t.ok(total <= 600 * 2 * SHARED, `${total.toFixed(1)} ms of statements for 600 units at 2 ms a unit: a third kept back`);
  t.ok(total >= 600 * 2 * SHARED * 0.99, 'and the rest shared out, not held back');
});

t.test('a request admitted while others are in flight shares only what they cannot still be charged', async (t) => {
  // Eight in flight, each with its 100 ms and a claim on 75 units (its share, the part kept back included);
  // one ends, charged 56 units: 600 − 8 − 55 = 537 left, of which the seven still in flight may take 74 units
  // each as they end.
  const inFlight = Array.from({ length: 7 }, () => new RequestBudget(1, 599, 8));
  const claimed = 7 * 74;
  t.equal(new RequestBudget(1, 536, 8, inFlight).timeoutMs(), 50, 'the floor: (537 − 518) × 2/3 × 2 ms is less');
  // Without them in flight it would have had two thirds of 537 ÷ 8, at 2 ms a unit.
  t.equal(new RequestBudget(1, 536, 8).timeoutMs(), (537 / 8) * SHARED * 2);
  // Others that used part of their time still claim all of it: it is charged when they end, not as they run.
  for (const other of inFlight) other.used(100);
  t.equal(new RequestBudget(1, 536, 8, inFlight).timeoutMs(), Math.max(50, (537 - claimed) * SHARED * 2));
  // With fewer in flight, what they cannot take is shared among the slots left.
  t.equal(new RequestBudget(1, 536, 8, inFlight.slice(0, 2)).timeoutMs(), ((537 - 2 * 74) / 6) * SHARED * 2);
});

t.test('a request whose client has nothing left once its requests in flight are charged waits, then is declined', async (t) => {
  const flights = new Flights();
  // Eight of a free key's trap chunks at once from a full window: each its budget, all eight run at once.
  const wave: RequestBudget[] = [];
  for (let i = 0; i < 8; i++) wave.push((await flights.admit('key:a', flights.mark(), 1, 600 - (i + 1), 8)) as RequestBudget);
  t.same(
    wave.filter((budget) => !(budget instanceof RequestBudget)),
    [],
    'all eight run (none declined)',
  );
  // The first is cut short and charged 80 units beyond its 1 (its cancel landed late). Its client's next
  // request, whose decision saw that charge (592 − 80 = 512 left, 511 after its unit), comes while the other
  // seven may still be charged 74 units each: less than the floor is left beside them.
  flights.end('key:a', wave[0]!, 80);
  let next: RequestBudget | number | undefined;
  const pending = flights.admit('key:a', flights.mark(), 1, 511, 8);
  t.ok(pending instanceof Promise, 'not answered at once');
  const admitted = Promise.resolve(pending).then((result) => {
    next = result;
  });
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(next, undefined, 'it waits');
  // Each of the seven is charged 80 units beyond its price as it ends: 560, more than the 511.
  for (const budget of wave.slice(1)) flights.end('key:a', budget, 80);
  await admitted;
  t.equal(next, 560, 'declined, owing what the seven were charged since its decision');
});

t.test('a client near the end of its allowance runs as many requests at once as it can pay the floor for', async (t) => {
  const flights = new Flights();
  // 101 units left, 8 in flight allowed: each request claims the floor's 25 units (24 beyond its 1).
  const running: RequestBudget[] = [];
  for (let i = 0; i < 4; i++) running.push((await flights.admit('key:b', flights.mark(), 1, 101 - (i + 1), 8)) as RequestBudget);
  t.same(
    running.map((budget) => (budget instanceof RequestBudget ? budget.timeoutMs() : budget)),
    [50, 50, 50, 50],
    'four run at once, each at the floor',
  );
  let fifth: RequestBudget | number | undefined;
  const queued = flights.admit('key:b', flights.mark(), 1, 96, 8);
  t.ok(queued instanceof Promise, 'not answered at once');
  const waiting = Promise.resolve(queued).then((result) => {
    fifth = result;
  });
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(fifth, undefined, 'the fifth waits: 97 less the four floors is less than a floor');
  // One of them ends, charged its price only (an ordinary chunk): the fifth runs.
  flights.end('key:b', running[0]!, 0);
  await waiting;
  t.ok(fifth instanceof RequestBudget, 'and runs once one ends');
  // A client with its whole allowance runs its eight at once.
  const full: (RequestBudget | number)[] = [];
  for (let i = 0; i < 8; i++) {
    const admitted = flights.admit('key:d', flights.mark(), 1, 600 - (i + 1), 8);
    t.notOk(admitted instanceof Promise, `the ${i + 1}th is answered at once, without a turn of the event loop`);
    full.push(await admitted);
  }
  t.same(
    full.filter((budget) => !(budget instanceof RequestBudget)),
    [],
    'eight at once from a full window (none declined)',
  );
});

t.test('a charge that ended before the decision was asked for is not counted twice', async (t) => {
  const flights = new Flights();
  const first = (await flights.admit('key:c', flights.mark(), 1, 599, 8)) as RequestBudget;
  const second = (await flights.admit('key:c', flights.mark(), 1, 598, 8)) as RequestBudget;
  flights.end('key:c', first, 300);
  // Asked for after that end: its decision's 297 left already hold the 300.
  const mark = flights.mark();
  const third = await flights.admit('key:c', mark, 1, 297, 8);
  t.ok(third instanceof RequestBudget, 'admitted');
  flights.end('key:c', second, 0);
  flights.end('key:c', third as RequestBudget, 0);
  // Its client's flight is forgotten once nothing is in flight, but a charge beyond the price is kept a while for
  // the decisions asked for before it.
  const late = await flights.admit('key:c', 0, 1, 100, 8);
  t.equal(late, 300, 'a decision asked for before the 300 were charged is declined, told of them');
});
