// The rows of `npm run bench` (bench/scenarios.ts): a ratio or a latency target names rows by their names, and
// the bench skips a ratio whose rows did not run (left out by --only), so a misspelt name would drop it without
// a word. Every name must be a row's, every row's server one the bench starts, and no two rows alike.
import t from 'tap';
import { comparisons, latencyTargets, scenarios, servers } from '../../bench/scenarios.ts';

const rowNames = scenarios.map((scenario) => scenario.name);
const serverNames = new Set(servers.map((server) => server.name));

t.test('no two rows and no two servers share a name', async (t) => {
  t.same(
    rowNames.filter((name, at) => rowNames.indexOf(name) !== at),
    [],
  );
  const names = servers.map((server) => server.name);
  t.same(
    names.filter((name, at) => names.indexOf(name) !== at),
    [],
  );
});

t.test("every row's server is one the bench starts", async (t) => {
  t.same(
    scenarios.filter((scenario) => !serverNames.has(scenario.server)).map((scenario) => `${scenario.name}: ${scenario.server}`),
    [],
  );
});

t.test('every ratio and latency target names rows that exist', async (t) => {
  const known = new Set(rowNames);
  const missing = comparisons.flatMap((comparison) =>
    [comparison.of, comparison.to].filter((name) => !known.has(name)).map((name) => `${comparison.label}: ${name}`),
  );
  t.same(missing, []);
  t.same(
    latencyTargets.filter((target) => !known.has(target.row)).map((target) => target.row),
    [],
  );
  t.ok(
    comparisons.some((comparison) => comparison.label.startsWith('limiter off / floor')),
    'the limiter-off / floor ratio is among them',
  );
});
