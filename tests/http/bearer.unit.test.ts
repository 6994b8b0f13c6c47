// Bearer credentials, without a database: the one reader of Authorization, and the digest keys are stored by.
import { createHash } from 'node:crypto';
import t from 'tap';
import { bearerToken, digest } from '../../lib/http/bearer.ts';

t.test('bearerToken: "Bearer", any case, one or more spaces, then one token kept as sent', async (t) => {
  const cases: [string, string][] = [
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['BEARER AbC', 'AbC'],
    ['bEaReR a.b-c_d~e+f/g=', 'a.b-c_d~e+f/g='],
    ['Bearer    abc', 'abc'],
    ['Bearer abc   ', 'abc'],
    ['Bearer pck_é😀', 'pck_é😀'],
  ];
  for (const [header, token] of cases) t.equal(bearerToken(header), token, JSON.stringify(header));
});

t.test('bearerToken: anything else is no token', async (t) => {
  for (const header of [
    '',
    'Bearer',
    'Bearer ',
    'Bearer  ',
    'Bearerabc',
    'Bearer\tabc',
    'Bearer abc\t',
    ' Bearer abc',
    'Bearer a b',
    'Basic abc',
    'Tokens abc',
    'Bearer: abc',
    'Bearer abc\n',
    'Bearer\u00a0abc',
  ]) {
    t.equal(bearerToken(header), undefined, JSON.stringify(header));
  }
});

t.test("bearerToken: `token <key>`, GitHub's other form (octokit sends it), is read as Bearer", async (t) => {
  for (const header of ['token abc', 'Token abc', 'TOKEN abc']) t.equal(bearerToken(header), 'abc', header);
});

t.test('digest: SHA-256 of the credential itself', async (t) => {
  const key = `pck_${'A'.repeat(32)}`;
  t.ok(digest(key).equals(createHash('sha256').update(key).digest()));
  t.equal(digest('').toString('hex'), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'the SHA-256 of nothing');
  t.notOk(digest('a').equals(digest('A')), 'case matters');
  t.ok(digest('é').equals(createHash('sha256').update(Buffer.from('é', 'utf8')).digest()), 'UTF-8');
});
