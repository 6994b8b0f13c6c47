// Asking again too soon (docs/reference/limits.md): a client declined over its allowance has its requests of
// the next second wait before their decision, which is still the limiter's; no other client waits, and no
// request is declined by the pause.
import t, { type Test } from 'tap';
import { createLogger } from '../../lib/http/logger.ts';
import { HOLD_WINDOW_MS, Holds } from '../../lib/ratelimit/holds.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { ADMIN_TOKEN, testApp } from '../helpers/app.ts';
import { limits, setTier } from '../helpers/limiter.ts';
import { type LogLine, logLines } from '../helpers/logs.ts';

/** An app with the limiter on (holds at `holdMs`, the default when undefined), its request lines read back. */
async function heldApp(t: Test, holdMs?: number) {
  let raw = '';
  const logger = createLogger({ level: 'info', destination: { write: (text: string) => (raw += text) } });
  const api = await testApp(t, { rateLimit: holdMs === undefined ? true : { holdMs }, logger });
  // One unit an hour for each address: the second request of an address is declined.
  await setTier(api.database.sql, 'anonymous', { allowance: 1, windowSeconds: 3600, concurrency: 8 });
  /** GET /v1 from `address`: its status, how long it took, and its log line. */
  const ask = async (address: string) => {
    const before = logLines(raw).length;
    const started = performance.now();
    const res = await api.request('/v1', { address });
    const ms = performance.now() - started;
    await res.arrayBuffer();
    const lines = logLines(raw).slice(before) as LogLine[];
    t.equal(lines.length, 1, 'one line for the request');
    return { res, status: res.status, ms, line: lines[0]! };
  };
  return { api, ask };
}

t.test('a client asking again within a second of a 429 waits before its decision; another client does not', async (t) => {
  const { api, ask } = await heldApp(t);
  t.equal((await ask('192.0.2.10')).status, 200);
  const first = await ask('192.0.2.10');
  t.equal(first.status, 429);
  t.equal(first.line.heldMs, undefined, 'the first 429 is not held: nothing was declined before it');
  const again = await ask('192.0.2.10');
  t.equal(again.status, 429);
  t.equal(again.line.heldMs, 50, 'held for the default 50 ms, as its line says');
  t.ok(again.ms >= 50, `it took at least the pause: ${again.ms.toFixed(1)} ms`);
  t.equal(again.line.outcome, 'declined');
  t.equal(limits(again.res).retryAfter, limits(first.res).retryAfter, 'the same answer as without the pause');
  const other = await ask('192.0.2.11');
  t.equal(other.status, 200);
  t.equal(other.line.heldMs, undefined, 'another address is not held');
  const metrics = await (await api.request('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
  t.match(metrics, /^ratelimit_held_total 1$/m, 'counted once in the metrics');
});

t.test('the hold lasts a second, at most the least Retry-After: a request after it is decided at once', async (t) => {
  const { ask } = await heldApp(t);
  await ask('192.0.2.20');
  t.equal((await ask('192.0.2.20')).status, 429);
  await new Promise((resolve) => setTimeout(resolve, HOLD_WINDOW_MS + 50));
  const later = await ask('192.0.2.20');
  t.equal(later.status, 429);
  t.equal(later.line.heldMs, undefined, 'past the window: not held');
  t.equal((await ask('192.0.2.20')).line.heldMs, 50, 'declined again: held again');
});

t.test('a held request is still decided by the limiter: served once its allowance is back, then no longer held', async (t) => {
  const { api, ask } = await heldApp(t);
  await ask('192.0.2.30');
  t.equal((await ask('192.0.2.30')).status, 429);
  api.clock += 7200; // the window and the one after it are over, in the database's clock
  const served = await ask('192.0.2.30');
  t.equal(served.line.heldMs, 50, 'held: declined within the second');
  t.equal(served.status, 200, 'and served, as its decision says');
  const next = await ask('192.0.2.30');
  t.equal(next.line.heldMs, undefined, 'admitted: no longer held');
});

t.test('keys are held by their own hash: another key from the same address is not held', async (t) => {
  const { api, ask } = await heldApp(t);
  const issue = async () => (await (await api.request('/v1/keys', { method: 'POST', address: '192.0.2.40' })).json()).key as string;
  const [spent, fresh] = [await issue(), await issue()];
  await setTier(api.database.sql, 'free', { allowance: 1, windowSeconds: 3600, concurrency: 8 });
  const withKey = (key: string) => api.request('/v1', { address: '192.0.2.40', headers: { authorization: `Bearer ${key}` } });
  t.equal((await withKey(spent)).status, 200);
  t.equal((await withKey(spent)).status, 429);
  const started = performance.now();
  t.equal((await withKey(spent)).status, 429);
  t.ok(performance.now() - started >= 50, 'the spent key is held');
  t.equal((await withKey(fresh)).status, 200, 'the other key is served');
  t.equal((await ask('192.0.2.40')).status, 200, 'and the address itself, without a key, is its own client');
});

t.test('holdMs 0 (LIMITER_HOLD_MS=0) holds nobody', async (t) => {
  const { ask } = await heldApp(t, 0);
  await ask('192.0.2.50');
  for (let i = 0; i < 3; i++) t.equal((await ask('192.0.2.50')).line.heldMs, undefined);
});

t.test('LIMITER_HOLD_MS: 50 by default, 0 to 1000, anything else stops start-up', async (t) => {
  t.equal(parseConfig({}).limiterHoldMs, 50);
  t.equal(parseConfig({ LIMITER_HOLD_MS: '0' }).limiterHoldMs, 0);
  t.equal(parseConfig({ LIMITER_HOLD_MS: '1000' }).limiterHoldMs, 1000);
  for (const value of ['1001', '-1', '5ms', '0x10']) {
    t.throws(() => parseConfig({ LIMITER_HOLD_MS: value }), /Invalid LIMITER_HOLD_MS/, JSON.stringify(value));
  }
});

t.test('Holds forgets the client declined longest ago past its bound, and a hold once its second is over', async (t) => {
  const holds = new Holds(50, 2);
  t.equal(holds.empty, true);
  holds.declined('a', 0);
  holds.declined('b', 10);
  holds.declined('a', 20); // declined again: now the latest
  holds.declined('c', 30);
  t.equal(holds.holds('b', 40), false, 'b, declined longest ago, is forgotten');
  t.equal(holds.holds('a', 40), true);
  t.equal(holds.holds('c', 40), true);
  t.equal(holds.holds('a', 20 + HOLD_WINDOW_MS), false, 'over at the end of its second');
  t.equal(holds.holds('c', 30 + HOLD_WINDOW_MS - 1), true);
  holds.cleared('c');
  t.equal(holds.holds('c', 40), false, 'cleared');
  t.equal(holds.empty, true, 'nothing kept once over or cleared');
});
