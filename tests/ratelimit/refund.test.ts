// A refund (a 304's units, given back with its lease release) gives back exactly its own charge, once, in either limiter statement.
import t from 'tap';
import { databaseLimiter } from '../../lib/ratelimit/limiter.ts';
import { testDatabase } from '../helpers/db.ts';
import { chargedUnits, setTier } from '../helpers/limiter.ts';

const input = (ipSubject: string, cost: number, clockOffset = 0) => ({
  keyHash: undefined,
  ipSubject,
  ipTier: 'anonymous',
  cost,
  clockOffset,
});

t.test('a release with a refund gives back exactly what its decision charged, and a release sent again gives nothing', async (t) => {
  const database = await testDatabase(t);
  await setTier(database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 8 });
  const limiter = databaseLimiter(database.sql, 30);
  const subject = 'ip:192.0.2.10';
  const a = await limiter.decide(input(subject, 3));
  const b = await limiter.decide(input(subject, 5));
  t.equal(a.charged, 3);
  t.equal(b.charged, 5);
  t.equal(await chargedUnits(database.sql, subject), 8);
  // Alone, a release goes as rate_release.
  await limiter.release(subject, a.lease!, { units: a.charged, bucketExpiry: a.reset });
  t.equal(await chargedUnits(database.sql, subject), 5, "a's 3 units back, b's 5 still counted");
  // A release sent again (the limiter resends one whose answer it lost) finds the lease released.
  await limiter.release(subject, a.lease!, { units: a.charged, bucketExpiry: a.reset });
  t.equal(await chargedUnits(database.sql, subject), 5, 'never twice');
  const c = await limiter.decide(input(subject, 1));
  t.equal(c.remaining, 94, 'the next decision sees the refund');
});

t.test('the refund rides in the release statement: no statement more than a release without one', async (t) => {
  const database = await testDatabase(t);
  const statements: string[] = [];
  // Every statement the limiter sends is a tagged call of its client: count them, and what they call (a call
  // naming an identifier, sql(SERVICE_SCHEMA), sends nothing).
  const counted = new Proxy(database.sql, {
    apply(target, self, args: [TemplateStringsArray, ...unknown[]]) {
      if (Array.isArray(args[0]) && 'raw' in args[0])
        statements.push(args[0].join('?').includes('rate_decide') ? 'rate_decide' : 'rate_release');
      return Reflect.apply(target, self, args);
    },
  });
  const limiter = databaseLimiter(counted, 30);
  const subject = 'ip:192.0.2.13';
  const plain = await limiter.decide(input(subject, 2));
  await limiter.release(subject, plain.lease!);
  const refunded = await limiter.decide(input(subject, 2));
  await limiter.release(subject, refunded.lease!, { units: refunded.charged, bucketExpiry: refunded.reset });
  t.same(statements, ['rate_decide', 'rate_release', 'rate_decide', 'rate_release']);
  t.equal(await chargedUnits(database.sql, subject), 2, 'and the second request is free');
});

t.test("a cost above the allowance is refused as such, charging nothing; an invalid key's is capped at it", async (t) => {
  const database = await testDatabase(t);
  await setTier(database.sql, 'anonymous', { allowance: 10, windowSeconds: 60, concurrency: 8 });
  const limiter = databaseLimiter(database.sql, 30);
  const subject = 'ip:192.0.2.11';
  const big = await limiter.decide(input(subject, 11));
  t.same([big.outcome, big.charged, big.remaining, big.lease], ['cost', 0, 10, undefined], 'refused, nothing charged, no lease');
  const whole = await limiter.decide(input(subject, 10));
  t.equal(whole.outcome, 'ok', 'the whole allowance fits');
  const over = await limiter.decide(input(subject, 11));
  t.equal(over.outcome, 'cost', 'refused as such even with nothing left: waiting would not help');
  const invalid = await limiter.decide({ ...input('ip:192.0.2.12', 500), keyHash: Buffer.alloc(0) });
  t.same([invalid.outcome, invalid.charged], ['invalid_key', 10], "an invalid key's cost is charged to its address, capped");
});

t.test('a refund whose bucket stopped counting gives nothing back: never units that expire later than its own', async (t) => {
  const database = await testDatabase(t);
  await setTier(database.sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 8 });
  const limiter = databaseLimiter(database.sql, 300);
  const subject = 'ip:192.0.2.12';
  const old = await limiter.decide(input(subject, 4));
  const later = await limiter.decide(input(subject, 2, 120)); // two minutes on: the first bucket has expired
  t.equal(later.remaining, 98);
  await limiter.release(subject, old.lease!, { units: old.charged, bucketExpiry: old.reset });
  t.equal(await chargedUnits(database.sql, subject), 2, 'the later bucket keeps its 2 units');
});

t.test('rate_decide carries refunds like rate_release: one subject (its fast path) or several, once', async (t) => {
  const database = await testDatabase(t);
  const sql = database.sql;
  await setTier(sql, 'anonymous', { allowance: 100, windowSeconds: 60, concurrency: 8 });
  const decide = async (subject: string, cost: number, release?: { subject: string; row: Record<string, unknown> }) => {
    const r = release?.row;
    const [row] = await sql.unsafe(
      `select * from paginated_collections.rate_decide('{NULL}', $1::text[], '{anonymous}', $2::int[], '{0}', 30, $3::text[], $4::int[], $5::bigint[], $6::int[], $7::bigint[])`,
      [
        `{${subject}}`,
        `{${cost}}`,
        r ? `{${release!.subject}}` : '{}',
        r ? `{${r.lease_slot}}` : '{}',
        r ? `{${r.lease_token}}` : '{}',
        r ? `{${r.charged}}` : '{}',
        r ? `{${r.reset}}` : '{}',
      ],
    );
    return row!;
  };
  const one = 'ip:192.0.2.20';
  const other = 'ip:192.0.2.21';
  const first = await decide(one, 6);
  const same = await decide(one, 1, { subject: one, row: first }); // one subject: the fast path
  t.equal(Number(same.remaining), 99, 'the 6 units back before the next decision, which costs 1');
  const again = await decide(one, 1, { subject: one, row: first });
  t.equal(Number(again.remaining), 98, 'the same release again gives nothing back');
  const second = await decide(one, 7);
  await decide(other, 1, { subject: one, row: second }); // several subjects: the general path
  t.equal(await chargedUnits(sql, one), 2, 'the 7 units back through the general path');
  await decide(other, 1, { subject: one, row: second });
  t.equal(await chargedUnits(sql, one), 2, 'once');
  // Without the refund arrays (an instance from before them), rate_decide and rate_release work as before.
  const [old] =
    await sql`select * from paginated_collections.rate_decide('{NULL}', '{ip:192.0.2.22}', '{anonymous}', '{1}', '{0}', 30, '{}', '{}', '{}')`;
  t.equal(old!.outcome, 'ok');
  await sql`select paginated_collections.rate_release('{ip:192.0.2.22}'::text[], ${`{${old!.lease_slot}}`}::int[], ${`{${old!.lease_token}}`}::bigint[])`;
  t.equal(await chargedUnits(sql, 'ip:192.0.2.22'), 1, 'a plain release refunds nothing');
});
