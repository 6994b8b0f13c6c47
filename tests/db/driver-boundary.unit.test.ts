// postgres.js's private fields are touched in db/driver.ts alone: no other file of the service, its entries, the
// demo, the bench or the scripts reads, writes or redefines a property of the driver's insides (db/driver.ts's
// functions do). The scan reads the code's syntax, so SQL that names a column `state` is not taken for one.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** The properties of postgres.js's Query, of its results and of the patched client that db/driver.ts reads for the rest. */
const FIELDS = new Set(['state', 'canceller', 'active', 'poolStats']);

const DRIVER = 'db/driver.ts';

/** Where the service's code is: every file below these folders, and these files. */
const FOLDERS = ['lib', 'db', 'demo', 'bench', 'client', 'scripts'];
const ENTRIES = ['server.ts', 'server.deno.ts', 'server.bun.ts'];

interface Touch {
  readonly field: string;
  readonly line: number;
  readonly text: string;
}

/** Every place in `source` that reads, writes, destructures, tests for or defines a property named in FIELDS. */
function touches(file: string, source: string): Touch[] {
  const tree = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: Touch[] = [];
  const note = (node: ts.Node, field: string) => {
    if (!FIELDS.has(field)) return;
    const { line } = tree.getLineAndCharacterOfPosition(node.getStart(tree));
    found.push({ field, line: line + 1, text: source.split('\n')[line]!.trim() });
  };
  const literal = (node: ts.Node | undefined) => (node !== undefined && ts.isStringLiteralLike(node) ? node.text : undefined);
  const visit = (node: ts.Node) => {
    if (ts.isPropertyAccessExpression(node)) note(node, node.name.text);
    else if (ts.isElementAccessExpression(node)) note(node, literal(node.argumentExpression) ?? '');
    else if (ts.isBindingElement(node) && ts.isObjectBindingPattern(node.parent)) {
      const name = node.propertyName ?? node.name;
      if (ts.isIdentifier(name) || ts.isStringLiteralLike(name)) note(node, name.text);
    } else if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.InKeyword) note(node, literal(node.left) ?? '');
    else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      // Object.defineProperty(query, 'active', …), Reflect.get(query, 'state') and the like.
      const callee = node.expression;
      if (ts.isIdentifier(callee.expression) && ['Object', 'Reflect'].includes(callee.expression.text)) {
        for (const argument of node.arguments) note(argument, literal(argument) ?? '');
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(tree);
  return found;
}

async function codeFiles(): Promise<string[]> {
  const files = [...ENTRIES];
  for (const folder of FOLDERS) {
    for (const entry of await readdir(path.join(root, folder), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && /\.(c|m)?(t|j)s$/.test(entry.name)) {
        files.push(path.relative(root, path.join(entry.parentPath, entry.name)));
      }
    }
  }
  return files.sort();
}

t.test('the scan finds each way of touching a field, and not SQL or other names', async (t) => {
  const sample = [
    'const pid = (query as unknown as Cancellable).state?.pid;',
    'query.canceller = null;',
    "Object.defineProperty(query, 'active', { get: () => active });",
    "if ((statement.query as { state?: unknown })['state'] === null) renew();",
    'const { canceller } = query;',
    "if ('poolStats' in sql) read();",
    'const read = (sql as Sql & { poolStats?: () => PoolStats }).poolStats;',
  ].join('\n');
  t.same(
    touches('sample.ts', sample).map((touch) => [touch.field, touch.line]),
    [
      ['state', 1],
      ['canceller', 2],
      ['active', 3],
      ['state', 4],
      ['canceller', 5],
      ['poolStats', 6],
      ['poolStats', 7],
    ],
  );
  const innocent = [
    "watch`select pid from pg_stat_activity as a where a.state = 'active'`;",
    "this.set({ pool, state: 'in_use' }, inUse);",
    'const inFlight = new Set();',
    'const state = connection.status;',
  ].join('\n');
  t.same(touches('innocent.ts', innocent), [], 'SQL text, object literals and variables are not accesses');
});

t.test('db/driver.ts alone touches the fields, and it touches each of them', async (t) => {
  const files = await codeFiles();
  for (const file of [DRIVER, 'lib/pagination/shapes.ts', 'lib/ratelimit/limiter.ts', 'lib/http/metrics.ts', 'db/probe.ts', 'server.ts']) {
    t.ok(files.includes(file), `the scan reads ${file}`);
  }
  const outside: string[] = [];
  const inDriver = new Set<string>();
  for (const file of files) {
    for (const touch of touches(file, await readFile(path.join(root, file), 'utf8'))) {
      if (file === DRIVER) inDriver.add(touch.field);
      else outside.push(`${file}:${touch.line} (${touch.field}): ${touch.text}`);
    }
  }
  t.same([...inDriver].sort(), [...FIELDS].sort(), `${DRIVER} holds every access, so the scan sees each field`);
  t.same(outside, [], `no other file touches them: use ${DRIVER}'s functions (a property of that name on another object: rename it)`);
});
