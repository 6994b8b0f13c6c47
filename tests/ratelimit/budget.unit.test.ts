// A request's statement budget (lib/ratelimit/budget.ts; docs/rate-limit.md, "Statement budgets"): its share of what
// its client had, never less than the floor nor its own units, and never a share of what the client's other
// requests in flight may still be charged for their time.
import t from 'tap';
import { RequestBudget } from '../../lib/ratelimit/budget.ts';

t.test("a share of what the client had before its charge, among the tier's requests in flight", async (t) => {
  // A free key: 600 units, 8 in flight, a 1-unit chunk: 600 ÷ 8 × 2 ms.
  t.equal(new RequestBudget(1, 599, 8).timeoutMs(), 150);
  // Its own units where they are more than the share; the floor where both are less.
  t.equal(new RequestBudget(400, 100, 8).timeoutMs(), 800);
  t.equal(new RequestBudget(1, 9, 4).timeoutMs(), 50);
  // What its statements used comes off what is left, down to the floor.
  const budget = new RequestBudget(1, 599, 8);
  budget.used(60);
  t.equal(budget.timeoutMs(), 90);
  budget.used(80);
  t.equal(budget.timeoutMs(), 50);
});

t.test('eight requests admitted at once from a full window stay within the allowance together', async (t) => {
  const admitted: RequestBudget[] = [];
  for (let i = 0; i < 8; i++) admitted.push(new RequestBudget(1, 600 - (i + 1), 8, [...admitted]));
  const total = admitted.reduce((sum, budget) => sum + budget.timeoutMs(), 0);
  t.ok(total <= 600 * 2, `${total.toFixed(1)} ms of statements for 600 units at 2 ms a unit`);
  t.ok(total >= 600 * 2 * 0.99, 'and about all of it: the allowance is shared out, not held back');
});

t.test('a request admitted while others are in flight shares only what they cannot still be charged', async (t) => {
  // Eight in flight, each with its 150 ms; one ends, charged its 75 units: 600 − 8 − 74 = 518 left, which the
  // seven still in flight may take as they end (74 units each beyond their 1). The next one admitted (1 unit)
  // has nothing of it to share: the floor.
  const inFlight = Array.from({ length: 7 }, () => new RequestBudget(1, 599, 8));
  t.equal(new RequestBudget(1, 517, 8, inFlight).timeoutMs(), 50);
  // Without them in flight it would have had 518 ÷ 8 × 2 ms.
  t.equal(new RequestBudget(1, 517, 8).timeoutMs(), 129.5);
  // Others that used part of their time still claim all of it: it is charged when they end, not as they run.
  for (const other of inFlight) other.used(100);
  t.equal(new RequestBudget(1, 517, 8, inFlight).timeoutMs(), 50);
  // With fewer in flight, what they cannot take is shared among the slots left.
  t.equal(new RequestBudget(1, 517, 8, inFlight.slice(0, 2)).timeoutMs(), ((518 - 2 * 74) / 6) * 2);
});
