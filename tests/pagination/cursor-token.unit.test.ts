// Signed cursors, without a database: round trips, and every defect a 400 invalid_cursor saying why.
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import t from 'tap';
import { ApiError } from '../../lib/http/errors.ts';
import { type CursorPayload, decodeCursor, encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { invalidCursor, problemOf } from '../helpers/problem.ts';

const SECRET = 'unit-secret-0123456789abcdefghijklmnop';
const payload: CursorPayload = {
  v: 'cursor',
  c: 'products',
  s: '-priceCents,name,id',
  f: [['category[in]', 'books,toys']],
  k: [1999, 'Anvil', 42],
};
const token = encodeCursor(SECRET, payload);
const [, body, signature] = token.split('.') as [string, string, string];

/** A token signed as the service signs, over any body: what a holder of the secret could forge. */
function signed(secret: string, text: string | Buffer): string {
  const forgedBody = Buffer.from(text).toString('base64url');
  return `v1.${forgedBody}.${createHmac('sha256', secret).update(`v1.${forgedBody}`).digest('base64url')}`;
}

t.test('a token is v1.<base64url JSON>.<base64url HMAC-SHA256> and decodes to its payload', async (t) => {
  t.match(token, /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  t.same(JSON.parse(Buffer.from(body, 'base64url').toString()), payload);
  t.same(decodeCursor(SECRET, token, 'products'), payload);
  t.equal(signed(SECRET, JSON.stringify(payload)), token, 'the test signer signs as the service does');
  t.same(decodeCursor(SECRET, signed(SECRET, '{"v":"time","c":"events","x":null}'), 'events'), { v: 'time', c: 'events', x: null });
});

t.test('property: any payload round-trips under any secret, and only under it and its collection', async (t) => {
  const anyPayload = fc.record({
    v: fc.constantFrom('cursor' as const, 'time' as const),
    c: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 10 }),
    extra: fc.dictionary(
      fc.string({ maxLength: 4 }).filter((key) => key !== 'v' && key !== 'c'),
      fc.jsonValue({ maxDepth: 2 }),
      { maxKeys: 4 },
    ),
  });
  const secret = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 });
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(anyPayload, secret, secret, ({ v, c, extra }, mine, theirs) => {
        const sent: CursorPayload = { ...extra, v, c };
        const text = encodeCursor(mine, sent);
        const expected = JSON.parse(JSON.stringify(sent)) as unknown;
        if (JSON.stringify(decodeCursor(mine, text, c)) !== JSON.stringify(expected)) return false;
        const other = problemOf(() => decodeCursor(mine, text, `${c}x`));
        if (JSON.stringify(other) !== JSON.stringify(invalidCursor('it belongs to another collection'))) return false;
        if (theirs === mine) return true;
        return JSON.stringify(problemOf(() => decodeCursor(theirs, text, c))) === JSON.stringify(invalidCursor('signature does not match'));
      }),
      { numRuns: 500 },
    ),
  );
});

t.test('tampered, foreign and re-spelled tokens: signature does not match', async (t) => {
  const mismatch = invalidCursor('signature does not match');
  const otherBody = encodeCursor(SECRET, { ...payload, k: [0, 'Anvil', 1] }).split('.')[1]!;
  t.same(
    problemOf(() => decodeCursor(SECRET, `v1.${otherBody}.${signature}`, 'products')),
    mismatch,
    'another payload under this signature',
  );
  t.same(
    problemOf(() => decodeCursor('another-secret-0123456789abcdefghijkl', token, 'products')),
    mismatch,
    'another secret',
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, `v1.${body}A.${signature}`, 'products')),
    mismatch,
    'a body one character longer',
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, `v1.${body}.${signature.slice(0, -1)}`, 'products')),
    mismatch,
    'a signature one character short',
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, `v1.${body}.${signature}AA`, 'products')),
    mismatch,
    'a signature two characters long',
  );
  for (let at = 0; at < signature.length; at += 7) {
    const altered = signature.slice(0, at) + (signature[at] === 'A' ? 'B' : 'A') + signature.slice(at + 1);
    t.same(
      problemOf(() => decodeCursor(SECRET, `v1.${body}.${altered}`, 'products')),
      mismatch,
      `signature character ${at}`,
    );
  }
  // The 43rd character holds 4 bits and 2 unused ones: another spelling of the same 32 bytes is refused too.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const respelled = signature.slice(0, -1) + alphabet[alphabet.indexOf(signature.at(-1)!) ^ 1]!;
  t.ok(Buffer.from(respelled, 'base64url').equals(Buffer.from(signature, 'base64url')), 'the same bytes');
  t.same(
    problemOf(() => decodeCursor(SECRET, `v1.${body}.${respelled}`, 'products')),
    mismatch,
    'no second spelling of a cursor',
  );
});

t.test('garbage is malformed, another version unsupported, and more than 16 KiB too long', async (t) => {
  const malformed = invalidCursor('malformed');
  for (const text of [
    '',
    'x',
    'v1',
    'v1.',
    'v1..',
    `v1.${body}`,
    `v1.${body}.`,
    `v1..${signature}`,
    `v1.${body}.${signature}.x`,
    `v1.${body}=.${signature}`,
    `v1.${body}.${signature}=`,
    `v1.e30+.${signature}`,
    'v1.a b.c',
  ]) {
    t.same(
      problemOf(() => decodeCursor(SECRET, text, 'products')),
      malformed,
      JSON.stringify(text.slice(0, 40)),
    );
  }
  t.same(
    problemOf(() => decodeCursor(SECRET, `v2.${body}.${signature}`, 'products')),
    invalidCursor('unsupported version "v2"'),
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, `V1.${body}.${signature}`, 'products')),
    invalidCursor('unsupported version "V1"'),
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, `${'9'.repeat(50)}.a.b`, 'products')),
    invalidCursor('unsupported version "9999999999"'),
    'quoted, at most 10 characters',
  );
  const long = (length: number) => `v1.${'A'.repeat(length - 7)}.AAA`;
  t.equal(long(16385).length, 16385);
  t.same(
    problemOf(() => decodeCursor(SECRET, long(16385), 'products')),
    invalidCursor('too long'),
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, long(16384), 'products')),
    invalidCursor('signature does not match'),
    '16384 characters are read',
  );
  t.equal(
    decodeCursor(SECRET, signed(SECRET, JSON.stringify({ v: 'cursor', c: 'products', pad: 'p'.repeat(12_000) })), 'products').v,
    'cursor',
    'a long, well-signed cursor',
  );
});

t.test('a correctly signed body that is not a cursor payload is malformed; one of another collection is foreign', async (t) => {
  const malformed = invalidCursor('malformed');
  const bodies: (string | Buffer)[] = [
    'not json',
    '',
    '[]',
    'null',
    '1',
    '"cursor"',
    '{}',
    '{"c":"products"}',
    '{"v":"offset","c":"products"}',
    '{"v":"page","c":"products"}',
    '{"v":"Cursor","c":"products"}',
    '{"v":["cursor"],"c":"products"}',
    '[{"v":"cursor","c":"products"}]',
    Buffer.from([0xff, 0xfe, 0x7b, 0x7d]),
  ];
  for (const text of bodies) {
    t.same(
      problemOf(() => decodeCursor(SECRET, signed(SECRET, text), 'products')),
      malformed,
      JSON.stringify(String(text)),
    );
  }
  t.same(
    problemOf(() => decodeCursor(SECRET, signed(SECRET, '{"v":"cursor"}'), 'products')),
    invalidCursor('it belongs to another collection'),
    'no collection',
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, signed(SECRET, '{"v":"cursor","c":"Products"}'), 'products')),
    invalidCursor('it belongs to another collection'),
  );
  t.same(
    problemOf(() => decodeCursor(SECRET, token, 'orders')),
    invalidCursor('it belongs to another collection'),
  );
});

t.test('the error itself: a 400 invalid_cursor whose detail gives the reason', async (t) => {
  try {
    decodeCursor(SECRET, token, 'events');
    t.fail('no error');
  } catch (error) {
    t.ok(error instanceof ApiError);
    t.equal((error as ApiError).detail, 'Invalid cursor: it belongs to another collection');
    t.equal((error as ApiError).status, 400);
  }
});
