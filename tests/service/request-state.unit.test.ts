// A request's state travels as values, not beside them: Hono's context carries one variable, the Exchange
// (lib/http/exchange.ts), and no module keeps per-request state in a WeakMap keyed by a Request or Response.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../..', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.join(dir, file));
}

const files = [...sources('lib'), 'server.ts', 'server.deno.ts', 'server.bun.ts'].map((file) => ({
  file,
  text: readFileSync(path.join(root, file), 'utf8'),
}));

t.test('one context variable, declared in lib/http/exchange.ts', async (t) => {
  const declaring = files.filter(({ text }) => text.includes("declare module 'hono'")).map(({ file }) => file);
  t.same(declaring, ['lib/http/exchange.ts'], 'only the exchange module adds to ContextVariableMap');
  const exchange = files.find(({ file }) => file === 'lib/http/exchange.ts')!.text;
  const block = /declare module 'hono' \{\s*interface ContextVariableMap \{([\s\S]*?)\n {2}\}\n\}/.exec(exchange)?.[1] ?? '';
  const variables = [...block.matchAll(/^\s{4}(\w+)\??:/gm)].map((match) => match[1]);
  t.same(variables, ['exchange'], 'and it declares the exchange alone');
});

t.test('nothing sets or reads another context variable', async (t) => {
  const uses = files.flatMap(({ file, text }) =>
    [...text.matchAll(/\bc\??\.(set|get|var)\b\(?\s*['"`.]?(\w+)/g)].map((match) => `${file}: c.${match[1]}('${match[2]}')`),
  );
  t.ok(uses.length > 0, 'the scan finds the context variable where it is used');
  t.same(
    uses.filter((use) => !use.endsWith("('exchange')")),
    [],
    'every use names the exchange',
  );
});

t.test('no WeakMap keyed by a request or an answer', async (t) => {
  const maps = files.flatMap(({ file, text }) =>
    [...text.matchAll(/new WeakMap<\s*(\w+)/g)].map((match) => `${file}: WeakMap<${match[1]}>`),
  );
  t.same(
    maps.filter((map) => /WeakMap<(Response|Request|Context|HonoRequest)>$/.test(map)),
    [],
    'per-request state travels as values',
  );
});
