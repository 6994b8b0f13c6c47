// docs/how-to/walk-a-collection.md stays true: each block marked `recipe` runs as written (but for the port) against a fresh
// service whose anonymous allowance is tiny, so each meets 429s and must wait them out, and prints how many
// products it walked: exactly those of the query, each once.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { setTier } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const markdown = readFileSync(path.join(root, 'docs', 'how-to', 'walk-a-collection.md'), 'utf8');
/** The header of the request the test holds in flight while a recipe starts. */
const HELD = 'x-test-held';

interface Recipe {
  readonly line: number;
  readonly language: string;
  readonly code: string;
}

/** The fenced blocks whose info string is `<language> recipe`. */
function recipesOf(text: string): Recipe[] {
  const recipes: Recipe[] = [];
  let open: { line: number; language: string; lines: string[] } | undefined;
  text.split('\n').forEach((line, index) => {
    const fence = /^```(\S*)\s*(recipe)?\s*$/.exec(line);
    if (fence && open === undefined) {
      if (fence[2]) open = { line: index + 1, language: fence[1]!, lines: [] };
      else if (fence[1] !== '') open = { line: -1, language: '', lines: [] };
      return;
    }
    if (line.startsWith('```') && open !== undefined) {
      if (open.line !== -1) recipes.push({ line: open.line, language: open.language, code: `${open.lines.join('\n')}\n` });
      open = undefined;
      return;
    }
    open?.lines.push(line);
  });
  return recipes;
}

function run(command: string, args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env: { PATH: process.env.PATH ?? '', HOME: cwd }, timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

t.test('every recipe of docs/how-to/walk-a-collection.md walks the whole query once, waiting out 429s', async (t) => {
  const recipes = recipesOf(markdown);
  t.same(
    recipes.map((recipe) => recipe.language),
    ['sh', 'sh', 'ts', 'ts', 'ts', 'ts'],
    'curl, HTTPie, ky, got, octokit and the client',
  );
  // A statement timeout well past a recipe's start-up, for the request held in flight below.
  const api = await testApp(t, { seed: { products: 200 }, rateLimit: true, statementTimeoutMs: 60_000 });
  // Every answer's status but the held request's, to see each recipe meet 429s.
  let statuses: number[] = [];
  let letGo: (() => Promise<void>) | undefined;
  const base = await listening(t, {
    async fetch(request) {
      const response = await api.app.fetch(request);
      if (request.headers.has(HELD)) return response;
      statuses.push(response.status);
      // The recipe's first answer is out (a 429): the held request may finish.
      await letGo?.();
      return response;
    },
  });
  const { sql } = api.database;
  const [row] = await sql`select count(*)::int as n from demo.products where category in ('books', 'toys')`;
  const expected = row!.n as number;
  t.ok(expected > 20, `${expected} products: several chunks of ten`);
  // A few units a second, one request at a time: a recipe fast enough meets 429s of the rate (it needs
  // about six chunks), and every recipe meets at least one of the cap (below), and goes on only if it waits.
  await setTier(sql, 'anonymous', { allowance: 3, windowSeconds: 1, concurrency: 1 });

  /**
   * One request of the same client held in flight until the recipe's first answer: that answer is a 429
   * (the cap, Retry-After 1) however slowly the recipe's client starts. A rate of a few units a second did
   * not do it alone: HTTPie takes over a second a request on a busy 2-core machine, and met none. The
   * request is held by a lock on products, which its query waits for with its lease taken.
   */
  async function holdOne(): Promise<void> {
    // Not to be declined itself: every unit a recipe spent has expired 2 s after it (a window of 1 s in
    // buckets of 1 s), and the last recipe's lease went with its last answer.
    await sleep(2_100);
    const lock = await sql.reserve();
    await lock`begin`;
    await lock`lock table demo.products in access exclusive mode`;
    let answered: number | undefined;
    const held = fetch(`${base}/v1/products?limit=1&count=none`, { headers: { [HELD]: '1' } }).then((response) => {
      answered = response.status;
      return response.arrayBuffer();
    });
    await waitFor('the held request to wait for the lock', async () => {
      if (answered !== undefined) throw new Error(`the request to hold was answered ${answered} at once`);
      const [waiting] = await sql`select count(*)::int as n from pg_locks
        where database = (select oid from pg_database where datname = current_database())
          and relation = 'demo.products'::regclass and not granted`;
      return waiting!.n as number;
    });
    letGo = async () => {
      letGo = undefined;
      await lock`commit`;
      lock.release();
      await held;
    };
  }

  // TypeScript recipes run inside the repository, so that they import its packages and the client by name.
  mkdirSync(path.join(root, '.data'), { recursive: true });
  const folder = mkdtempSync(path.join(root, '.data', 'recipes-'));
  t.teardown(() => rmSync(folder, { recursive: true, force: true }));
  for (const [at, recipe] of recipes.entries()) {
    const code = recipe.code.replaceAll('http://localhost:3000', base);
    const where = `docs/how-to/walk-a-collection.md:${recipe.line}`;
    const cwd = mkdtempSync(path.join(folder, `${at}-`));
    const file = path.join(cwd, recipe.language === 'sh' ? 'recipe.sh' : 'recipe.ts');
    writeFileSync(file, code);
    statuses = [];
    await holdOne();
    const started = Date.now();
    const result = recipe.language === 'sh' ? await run('/bin/sh', ['-e', file], cwd) : await run(process.execPath, [file], cwd);
    await letGo?.();
    t.comment(`${where}: ${((Date.now() - started) / 1000).toFixed(1)} s ${JSON.stringify(statuses)}`);
    const detail = { stdout: result.stdout.slice(-1500), stderr: result.stderr.slice(-1500) };
    t.equal(result.code, 0, `${where} exits 0`, detail);
    t.equal(result.stdout.trim().split('\n').at(-1), `${expected} products`, `${where} walks every product of the query once`, detail);
    t.ok(statuses.includes(429), `${where} met ${statuses.filter((s) => s === 429).length} 429s on the way`);
    t.same(new Set(statuses), new Set([200, 429]), `${where} got nothing but chunks and 429s`);
  }
});
