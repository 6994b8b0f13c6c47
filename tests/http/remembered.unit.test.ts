// A function's answers remembered for the keys asked lately: once each, a bounded number, never an error.
import t from 'tap';
import { remembered } from '../../lib/http/remembered.ts';

t.test('an answer is computed once per key, and the same answer is given again', async (t) => {
  const asked: string[] = [];
  const length = remembered(10, (key: string) => {
    asked.push(key);
    return { length: key.length };
  });
  const first = length('abc');
  t.same(first, { length: 3 });
  t.equal(length('abc'), first, 'the very answer given before');
  t.same(length('de'), { length: 2 });
  t.same(asked, ['abc', 'de']);
});

t.test('undefined and null answers are remembered like any other', async (t) => {
  let calls = 0;
  const nothing = remembered(10, (key: string) => {
    calls++;
    return key === 'u' ? undefined : null;
  });
  t.equal(nothing('u'), undefined);
  t.equal(nothing('u'), undefined);
  t.equal(nothing('n'), null);
  t.equal(nothing('n'), null);
  t.equal(calls, 2);
});

t.test('a key whose computation throws is not remembered: it throws again', async (t) => {
  let calls = 0;
  const strict = remembered(10, (key: string) => {
    calls++;
    if (key === 'bad') throw new Error(`refused ${calls}`);
    return key;
  });
  t.throws(() => strict('bad'), { message: 'refused 1' });
  t.throws(() => strict('bad'), { message: 'refused 2' });
  t.equal(strict('good'), 'good');
  t.equal(calls, 3);
});

t.test('at most `max` keys are kept: past them, all are forgotten and computed again, each still right', async (t) => {
  const asked: number[] = [];
  const double = remembered(3, (key: number) => {
    asked.push(key);
    return key * 2;
  });
  for (const key of [1, 2, 3, 1, 2, 3]) t.equal(double(key), key * 2);
  t.same(asked, [1, 2, 3], 'three kept');
  t.equal(double(4), 8, 'a fourth: the three are forgotten');
  for (const key of [1, 2, 3]) t.equal(double(key), key * 2);
  t.same(asked, [1, 2, 3, 4, 1, 2, 3]);
});
