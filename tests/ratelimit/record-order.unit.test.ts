// The limiter databases' order for keys and tiers, without a database: by their records, never by the list.
import t from 'tap';
import { inRecordOrder } from '../../lib/ratelimit/record-order.ts';

const a = { url: 'postgres://u@db-a:5432/limiter', record: '2025-01-02T03:04:05.000001Z 0f' };
const b = { url: 'postgres://u@db-b:5432/limiter', record: '2025-01-02T03:04:05.000002Z 00' };
const c = { url: 'postgres://u@db-c:5432/limiter', record: '2025-03-01T00:00:00.000000Z aa' };

t.test('every order of the list gives the same order: oldest record first', async (t) => {
  const expected = [a.url, b.url, c.url];
  for (const list of [
    [a, b, c],
    [c, b, a],
    [b, c, a],
    [c, a, b],
  ]) {
    t.same(inRecordOrder(list), expected, list.map((each) => each.url.slice(13, 17)).join(','));
  }
});

t.test('a database added later never comes first', async (t) => {
  const added = { url: 'postgres://u@aaa:5432/limiter', record: '2026-01-01T00:00:00.000000Z 00' };
  t.equal(inRecordOrder([added, b, a])[0], a.url, 'the oldest stays the source, whatever its URL or place');
});

t.test('two URLs with one record: one line naming both', async (t) => {
  const twice = { url: 'postgres://u@DB-A.example:5432/limiter', record: a.record };
  t.throws(() => inRecordOrder([a, b, twice]), {
    message:
      /^LIMITER_DATABASE_URL names db-a:5432\/limiter and db-a\.example:5432\/limiter, which are one database or one a copy of the other [^\n]*$/,
  });
});
