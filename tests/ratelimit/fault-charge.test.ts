// A request answered 503 is never charged: decisions handed to the driver while the database was away are
// not sent once it is back.
import t from 'tap';
import { chargedUnits } from '../helpers/limiter.ts';
import { proxiedService, type Sample, sample, untilServed } from '../helpers/proxied.ts';
import { sleep } from '../helpers/wait.ts';

t.test('decisions of requests answered 503 are not made after the database is back', async (t) => {
  const { database, proxy, server } = await proxiedService(t);
  const answers: Sample[] = [];
  // One request after another: nothing is in flight at the moment the database goes away, so no
  // decision can be made on the server while its answer is lost.
  for (let i = 0; i < 5; i++) answers.push(await sample(server.url, '/v1'));
  t.same(
    answers.map((s) => s.status),
    [200, 200, 200, 200, 200],
    'served before',
  );

  proxy.reset();
  proxy.accept('blackhole'); // connection attempts are never answered: statements wait for a connection
  const away = performance.now() + 6_000;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (performance.now() < away) answers.push(await sample(server.url, '/v1'));
    }),
  );
  const unavailable = answers.filter((s) => s.status === 503);
  t.ok(unavailable.length >= 4, `503 while the database is away (${unavailable.length})`);
  t.same([...new Set(unavailable.map((s) => s.headers?.get('retry-after')))], ['1'], 'with Retry-After');

  // Back at once after the last 503, connection attempts under way included: a decision still held by the
  // driver would now be sent.
  proxy.reset();
  proxy.accept('pass');
  const back = performance.now();
  const recovery = await untilServed(server.url, '/v1', { intervalMs: 50 });
  answers.push(...recovery);
  t.comment(`served again ${Math.round(recovery.at(-1)!.done - back)} ms after the database is back`);
  await sleep(2_000); // a statement the driver still held would have been sent by now

  const made = answers.filter((s) => s.headers?.has('x-ratelimit-limit'));
  t.same([...new Set(made.map((s) => s.status))], [200], 'every answer with a decision was a 200');
  const charged = await chargedUnits(database.sql);
  t.comment(`${answers.length} answers: ${made.length} served, ${unavailable.length} answered 503; ${charged} units charged`);
  t.equal(charged, made.length, 'charged exactly the requests served, none of those answered 503');
  t.equal(answers.filter((s) => s.status === 500 || s.status === 0).length, 0, 'never a 500 or a hang');
});

t.test('a decision still waiting for a connection when its request is answered 503 is never sent', async (t) => {
  const { database, proxy, server } = await proxiedService(t);
  t.equal((await sample(server.url, '/v1')).status, 200);
  proxy.reset();
  proxy.accept('hold'); // connection attempts hang, then go through once the database is back
  const first = sample(server.url, '/v1');
  await sleep(100);
  const second = sample(server.url, '/v1'); // a statement of its own, queued behind the first's connection
  const away = await Promise.all([first, second]);
  t.same(
    away.map((s) => s.status),
    [503, 503],
    'both answered 503',
  );
  t.comment(`answered 503 after ${away.map((s) => Math.round(s.done - s.sent)).join(' and ')} ms`);

  proxy.accept('pass'); // the connection attempt under way now succeeds
  await untilServed(server.url, '/v1', { intervalMs: 50 });
  await sleep(2_000);
  t.equal(await chargedUnits(database.sql), 2, 'charged the two requests served, not the two answered 503');
});
