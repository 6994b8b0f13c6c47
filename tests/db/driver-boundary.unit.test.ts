// postgres.js's private fields are touched in db/driver.ts alone: no other file of the service, its entries, the
// demo, the bench or the scripts reads, writes or redefines a property of the driver's insides (db/driver.ts's
// functions do). The scan reads the code's syntax, so SQL that names a column `state` is not taken for one.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Names that only postgres.js's insides use here (Query's canceller, the patch's onactive slot, sql.poolStats and
 * sql.writePending): touched anyhow, they are found.
 */
const DRIVER_ONLY = new Set(['canceller', 'onactive', 'poolStats', 'writePending']);
/**
 * Names that are common words (Query's and a result's `state`, a Query's `active`): found where they are reached
 * past the types, as postgres.js's public types declare neither: read off a type assertion (`(query as
 * X).state`), read for the `pid` they hold (`.state?.pid`), named as a string (`Object.defineProperty(query,
 * 'active', …)`, `query['state']`, `'state' in query`), or declared as a `state` holding a `pid`. A `state` of a
 * type of the project's own, read as typed, is not the driver's.
 */
const REACHED = new Set(['state', 'active']);
const FIELDS = new Set([...DRIVER_ONLY, ...REACHED]);
/** Of FIELDS, those no file touches, db/driver.ts included: it hooks `active` through the patch's `onactive`. */
const UNTOUCHED = new Set(['active']);

const DRIVER = 'db/driver.ts';

/** Where the service's code is: every file below these folders, and these files. */
const FOLDERS = ['lib', 'db', 'demo', 'bench', 'client', 'scripts'];
const ENTRIES = ['server.ts', 'server.deno.ts', 'server.bun.ts'];

interface Touch {
  readonly field: string;
  readonly line: number;
  readonly text: string;
}

/** The expression under parentheses and `!`. */
function bare(node: ts.Expression): ts.Expression {
  while (ts.isParenthesizedExpression(node) || ts.isNonNullExpression(node)) node = node.expression;
  return node;
}

/** Whether a type (literal) declares a member named `pid`. */
function holdsPid(type: ts.TypeNode | undefined): boolean {
  let found = false;
  const look = (node: ts.Node) => {
    if (ts.isPropertySignature(node) && ts.isIdentifier(node.name) && node.name.text === 'pid') found = true;
    ts.forEachChild(node, look);
  };
  if (type !== undefined) look(type);
  return found;
}

/** Every place in `source` that touches one of FIELDS as the comments above say. */
function touches(file: string, source: string): Touch[] {
  const tree = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: Touch[] = [];
  const note = (node: ts.Node, field: string | undefined) => {
    if (field === undefined || !FIELDS.has(field)) return;
    const { line } = tree.getLineAndCharacterOfPosition(node.getStart(tree));
    found.push({ field, line: line + 1, text: source.split('\n')[line]!.trim() });
  };
  const literal = (node: ts.Node | undefined) => (node !== undefined && ts.isStringLiteralLike(node) ? node.text : undefined);
  const visit = (node: ts.Node) => {
    if (ts.isPropertyAccessExpression(node)) {
      const field = node.name.text;
      const pastTypes = ts.isAsExpression(bare(node.expression)) || ts.isTypeAssertionExpression(bare(node.expression));
      const forPid = ts.isPropertyAccessExpression(node.parent) && node.parent.expression === node && node.parent.name.text === 'pid';
      if (DRIVER_ONLY.has(field) || pastTypes || forPid) note(node, field);
    } else if (ts.isElementAccessExpression(node)) note(node, literal(node.argumentExpression));
    else if (ts.isBindingElement(node) && ts.isObjectBindingPattern(node.parent)) {
      const name = node.propertyName ?? node.name;
      if ((ts.isIdentifier(name) || ts.isStringLiteralLike(name)) && DRIVER_ONLY.has(name.text)) note(node, name.text);
    } else if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.InKeyword) note(node, literal(node.left));
    else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      // Object.defineProperty(query, 'active', …), Reflect.get(query, 'state') and the like.
      const callee = node.expression;
      if (ts.isIdentifier(callee.expression) && ['Object', 'Reflect'].includes(callee.expression.text)) {
        for (const argument of node.arguments) note(argument, literal(argument));
      }
    } else if ((ts.isPropertySignature(node) || ts.isPropertyDeclaration(node)) && ts.isIdentifier(node.name)) {
      const field = node.name.text;
      if (DRIVER_ONLY.has(field) || (field === 'state' && holdsPid(node.type))) note(node, field);
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

t.test('the scan finds the forms the driver was reached in, and not SQL or fields of other types', async (t) => {
  const sample = [
    'const pid = (query as unknown as Cancellable).state?.pid;',
    'query.canceller = null;',
    "Object.defineProperty(query, 'active', { get: () => active });",
    'if (gaveUp && statement && (statement.query as { state?: unknown }).state === null) renew();',
    'const { canceller } = query;',
    "if ('poolStats' in sql) read();",
    'const read = (sql as Sql & { poolStats?: () => PoolStats }).poolStats;',
    'interface Cancellable { state: { readonly pid: number } | null }',
    'const cancelKey = (result as unknown as { state: { pid: number } }).state;',
    "if (query['active']) wait();",
    'query.onactive = started;',
    'queueMicrotask((sql as Sql & { writePending: () => void }).writePending);',
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
      ['poolStats', 7],
      ['state', 8],
      ['state', 9],
      ['state', 9],
      ['active', 10],
      ['onactive', 11],
      ['writePending', 12],
      ['writePending', 12],
    ],
  );
  const innocent = [
    "watch`select pid from pg_stat_activity as a where a.state = 'active'`;",
    "this.set({ pool, state: 'in_use' }, inUse);",
    'const inFlight = new Set();',
    "type Report = { state: 'ready' } | { state: 'failed'; error: string };",
    "if (report!.state === 'failed' || breaker.active) throw new Error(report.error);",
  ].join('\n');
  t.same(touches('innocent.ts', innocent), [], "SQL text, object literals, variables and the fields of the project's own types");
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
  const used = [...FIELDS].filter((field) => !UNTOUCHED.has(field));
  t.same([...inDriver].sort(), used.sort(), `${DRIVER} holds every access, so the scan sees each field`);
  t.same(outside, [], `no other file touches them: use ${DRIVER}'s functions (a property of that name on another object: rename it)`);
});
