// A collection request's first stage: the reading of a query string is kept, so the same request sent again
// is not read again, and each request gets a value of its own that its estimate cannot leak from.
import t from 'tap';
import { demoRegistry } from '../../demo/collections.ts';
import { Preparer, prepare, withEstimate } from '../../lib/pagination/prepare.ts';

const SECRET = 's'.repeat(32);
const registry = demoRegistry();

t.test('the same query string is read once; each request gets its own Prepared', async (t) => {
  const preparer = new Preparer(registry, SECRET);
  const first = preparer.prepare('products', 'limit=5&sort=-priceCents');
  const again = preparer.prepare('products', 'limit=5&sort=-priceCents');
  if (first.kind !== 'read' || again.kind !== 'read') throw new Error('Expected two readings');
  t.equal(again.read, first.read, 'the reading is kept');
  t.not(again, first, 'the Prepared is a value of its own');
  const plain = prepare(registry, 'products', 'limit=5&sort=-priceCents', SECRET);
  t.same(first.read.plan, plain.kind === 'read' ? plain.read.plan : plain.error, 'as prepare reads it');

  withEstimate(first, 123);
  t.equal(first.read.plan.estimate, 123, 'the estimate goes into this request’s plan');
  t.equal(again.read.plan.estimate, undefined, 'and not into another’s');
  const third = preparer.prepare('products', 'limit=5&sort=-priceCents');
  if (third.kind !== 'read') throw new Error('Expected a reading');
  t.equal(third.read.plan.estimate, undefined, 'nor into the kept reading');
});

t.test('a 400 is kept too, and answered the same; an unknown collection is a 404', async (t) => {
  const preparer = new Preparer(registry, SECRET);
  const first = preparer.prepare('products', 'limit=abc');
  const again = preparer.prepare('products', 'limit=abc');
  if (first.kind !== 'refused' || again.kind !== 'refused') throw new Error('Expected two refusals');
  t.equal(again.error, first.error);
  t.equal(first.error.code, 'invalid_parameter');
  t.equal(first.price.units, 1, 'priced 1');
  const unknown = preparer.prepare('nothing', '');
  t.equal(unknown.kind === 'refused' && unknown.error.code, 'not_found');
});

t.test('another query string of the same collection is read anew', async (t) => {
  const preparer = new Preparer(registry, SECRET);
  const a = preparer.prepare('products', 'limit=5');
  const b = preparer.prepare('products', 'limit=6');
  if (a.kind !== 'read' || b.kind !== 'read') throw new Error('Expected two readings');
  t.equal(a.read.plan.pageSize, 5);
  t.equal(b.read.plan.pageSize, 6);
});
