// The walkthrough (docs/how-to/pagila.md) runs as written: every line of its shell blocks, in order, in one bash, as a
// reader types them into one terminal, so that what one line exports (DATABASE_URL, ADMIN_TOKEN, AUTH, WALK_KEY) the
// next ones read, the servers it starts in the background (`npm start &`) serve the lines after them, and `kill %1`
// stops each before the next one takes its port.
//
// What the test does otherwise, and why:
// - The load step. The page loads Pagila's dump (`createdb pagila`, `psql -f pagila.sql`, `export DATABASE_URL=…`);
//   a fresh clone has no dump, so the test checks that the block is those three lines and does the same with a
//   database of its own and a small fixture of Pagila's shape (tests/docs/pagila-fixture.sql: its tables, keys,
//   indexes, partitions, views and unpopulated materialized view, few rows), then exports that database's URL as
//   the page exports its own. Every later line runs as written: the page's figures (16044 rentals, …) are Pagila's,
//   and are not compared.
// - The port. Each line's `localhost:3000` is the test's free port, which the shell exports as PORT for the servers.
// - The folder. The lines run in a folder of the test's own holding links to the repository's files, so that the
//   files they write (pagila-init.yaml) land there and `docs/examples/pagila.yaml` is the repository's.
// - What a line must give: exit code 0; a server line, a server that says it listens; a `curl` line, a JSON answer
//   that is a problem only where the page shows one next (`"status":400`); a walk, every line `ok`.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { scratchDatabase, withSession } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const PAGE = 'docs/how-to/pagila.md';
const page = readFileSync(path.join(root, PAGE), 'utf8');
const FIXTURE = fileURLToPath(new URL('./pagila-fixture.sql', import.meta.url));

/** The port the page's lines are written for; rewritten to the test's. */
const PAGE_ORIGIN = 'localhost:3000';
/** The page's load step, which the test does with its fixture. */
const LOAD = ['createdb pagila', 'psql -q -d pagila -f pagila.sql', 'export DATABASE_URL=postgres://postgres@127.0.0.1:5432/pagila'];
/** Entries of the repository the work folder does not link to: its own state, and what the lines write. */
const NOT_LINKED = new Set(['.git', '.data', '.tap', 'pagila-init.yaml', 'rental-time.yaml']);

interface Step {
  /** 1-based line in the page. */
  readonly line: number;
  /** The heading of its section. */
  readonly section: string;
  readonly command: string;
  /** The problem status the page shows next for a one-line curl block, else undefined (no problem). */
  readonly problem: number | undefined;
}

/** Every line of the page's sh blocks, comments and blank lines aside, with its section and what the page shows after it. */
function stepsOf(markdown: string): Step[] {
  const lines = markdown.split('\n');
  const steps: Step[] = [];
  let section = '';
  for (let at = 0; at < lines.length; at++) {
    const text = lines[at]!;
    if (text.startsWith('## ')) section = text.slice(3);
    const fence = /^\s*```\s*(\S*)/.exec(text);
    if (!fence) continue;
    const end = lines.findIndex((candidate, index) => index > at && /^\s*```\s*$/.test(candidate));
    const body = lines.slice(at + 1, end);
    if (fence[1] === 'sh') {
      const commands = body
        .map((command, index) => ({ command: command.trim(), line: at + 2 + index }))
        .filter(({ command }) => command !== '' && !command.startsWith('#'));
      // The block the page shows after a one-line block: its answer.
      const next = lines.findIndex((candidate, index) => index > end && /^\s*```/.test(candidate));
      const nextEnd = lines.findIndex((candidate, index) => index > next && /^\s*```\s*$/.test(candidate));
      const shown = next === -1 || /^\s*```\s*sh/.test(lines[next]!) ? '' : lines.slice(next + 1, nextEnd).join('\n');
      const status = /"status":(4\d\d)/.exec(shown);
      for (const { command, line } of commands) {
        steps.push({ line, section, command, problem: commands.length === 1 && status ? Number(status[1]) : undefined });
      }
    }
    at = end;
  }
  return steps;
}

/** A bash of the test's own, fed one step at a time; each step's output goes to files of its own. */
class Shell {
  readonly #child: ChildProcessWithoutNullStreams;
  #stdout = '';
  #steps = 0;

  readonly folder: string;

  constructor(folder: string, env: Record<string, string>) {
    this.folder = folder;
    // detached: a process group of its own, which the teardown ends with every server it started.
    this.#child = spawn('bash', ['--norc', '--noprofile'], { cwd: folder, env, detached: true });
    this.#child.stdout.setEncoding('utf8').on('data', (chunk: string) => (this.#stdout += chunk));
    this.#child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.#stdout += chunk));
  }

  /** Runs `command` in the shell; resolves with its exit code and what it wrote (a background job's, as far as it got). */
  async run(
    command: string,
    timeoutMs = 120_000,
  ): Promise<{ code: number; out: string; err: string; files: { out: string; err: string } }> {
    const n = ++this.#steps;
    const files = { out: path.join(this.folder, `.step-${n}.out`), err: path.join(this.folder, `.step-${n}.err`) };
    const marker = new RegExp(`@@step ${n} (\\d+)@@`);
    this.#child.stdin.write(`{ ${command}\n} > '${files.out}' 2> '${files.err}'; echo "@@step ${n} $?@@"\n`);
    const started = Date.now();
    while (!marker.test(this.#stdout)) {
      if (Date.now() - started > timeoutMs) throw new Error(`No end to ${command} in ${timeoutMs} ms`);
      if (this.#child.exitCode !== null) throw new Error(`The shell exited (${this.#child.exitCode}) at ${command}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const code = Number(marker.exec(this.#stdout)![1]);
    return { code, out: readFileSync(files.out, 'utf8'), err: readFileSync(files.err, 'utf8'), files };
  }

  /** Ends the shell and everything it started. */
  stop(): void {
    if (this.#child.exitCode !== null) return;
    try {
      process.kill(-this.#child.pid!, 'SIGTERM');
    } catch {
      // Gone already.
    }
  }
}

/** Resolves once the background server writing to `files` says it listens; rejects when it says it could not start. */
async function listening(files: { out: string; err: string }, timeoutMs = 60_000): Promise<string> {
  const started = Date.now();
  for (;;) {
    const output = readFileSync(files.out, 'utf8') + readFileSync(files.err, 'utf8');
    if (output.includes('Listening on')) return output;
    // npm's own line when its script ended: the server is gone.
    const ended = /Could not start|^npm error|^Node\.js v/m.test(output);
    if (ended || Date.now() - started > timeoutMs) throw new Error(`The server did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

t.test('the walkthrough has its steps', async (t) => {
  const steps = stepsOf(page);
  t.same(
    steps.filter((step) => step.section === 'Load it').map((step) => step.command),
    LOAD,
    'the load step is the one this test does with its fixture',
  );
  const count = (pattern: RegExp) => steps.filter((step) => pattern.test(step.command)).length;
  t.equal(count(/\bnpm start &$/), 2, 'two servers, each started in the background');
  t.equal(count(/^kill %1 && wait$/), 2, 'each stopped before what follows');
  t.equal(count(/collections -- walk /), 2, 'two walks');
  t.equal(count(/^export ADMIN_TOKEN=/), 1, 'the admin token exported, for the server and the lines after it');
});

t.test('the walkthrough runs as written, line by line, in one shell', async (t) => {
  const database = await scratchDatabase(t);
  await withSession(database.url, (sql) => sql.unsafe(readFileSync(FIXTURE, 'utf8')).simple());
  const port = await freePort();
  const folder = mkdtempSync(path.join(tmpdir(), 'pagila-walkthrough-'));
  t.teardown(() => rmSync(folder, { recursive: true, force: true }));
  for (const entry of readdirSync(root)) if (!NOT_LINKED.has(entry)) symlinkSync(path.join(root, entry), path.join(folder, entry));
  const shell = new Shell(folder, { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: String(port), NO_COLOR: '1' });
  t.teardown(() => shell.stop());

  const loaded = await shell.run(`export DATABASE_URL='${database.url}'`);
  t.equal(loaded.code, 0, 'the fixture loaded in place of the dump, its URL exported');

  for (const step of stepsOf(page).filter((step) => step.section !== 'Load it')) {
    const command = step.command.replaceAll(PAGE_ORIGIN, `localhost:${port}`);
    const where = `${PAGE}:${step.line}: ${step.command}`;
    const { code, out, err, files } = await shell.run(command);
    t.equal(code, 0, `exits 0: ${where}`, { out: out.slice(-3000), err: err.slice(-3000) });
    if (/\bnpm start &$/.test(step.command)) {
      const output = await listening(files);
      const file = /COLLECTIONS=(\S+)/.exec(step.command)![1]!;
      t.match(output, `from ${file}`, `serves ${file}: ${where}`);
    } else if (step.command.startsWith('curl ')) {
      let answer: { status?: unknown; title?: unknown } | undefined;
      try {
        answer = JSON.parse(out) as typeof answer;
      } catch {
        t.fail(`answers JSON: ${where}`, { out: out.slice(0, 2000) });
        continue;
      }
      const problem = typeof answer?.title === 'string' && typeof answer.status === 'number' ? answer.status : undefined;
      t.equal(problem, step.problem, `${step.problem === undefined ? 'no problem' : `a ${step.problem}`}: ${where}`, {
        out: out.slice(0, 2000),
      });
    } else if (/collections -- walk /.test(step.command)) {
      const lines = out.trimEnd().split('\n');
      t.same(
        lines.slice(0, -1).filter((line) => !line.endsWith(': ok')),
        [],
        `every collection walked, each line ok: ${where}`,
      );
      t.match(lines.at(-1), /collections? walked, every key exactly once$/, where);
    }
  }
});
