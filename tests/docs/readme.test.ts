// The documentation holds: the README's curl examples run as written against a fresh service with demo data,
// and no file of the repository cites a document outside it (links: tests/docs/links.unit.test.ts).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { testDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const readme = readFileSync(path.join(root, 'README.md'), 'utf8');

/** The origin the README's examples are written for; rewritten to the test server's port. */
const README_ORIGIN = 'localhost:3000';

interface Example {
  /** 1-based line in README.md. */
  readonly line: number;
  readonly command: string;
  /** The status the trailing `# → 200` comment claims. */
  readonly status: number | undefined;
  /** Headers the comment names after the status (`# → 200, X-RateLimit-Remaining`), expected in the output. */
  readonly headers: readonly string[];
}

/** The lines of every ```sh / ```bash / ```shell block, with their line numbers. */
function shellLines(markdown: string): { line: number; text: string }[] {
  const lines: { line: number; text: string }[] = [];
  let inShell = false;
  let inFence = false;
  markdown.split('\n').forEach((text, index) => {
    const fence = /^\s*```\s*(\S*)/.exec(text);
    if (fence) {
      if (inFence) {
        inFence = false;
        inShell = false;
      } else {
        inFence = true;
        inShell = ['sh', 'bash', 'shell', 'console'].includes(fence[1]!);
      }
      return;
    }
    if (inShell) lines.push({ line: index + 1, text });
  });
  return lines;
}

function examplesOf(markdown: string): Example[] {
  return shellLines(markdown)
    .filter(({ text }) => text.trimStart().startsWith('curl -g '))
    .map(({ line, text }) => {
      const claim = /\s#\s*→\s*(\d{3})((?:\s*,\s*[A-Za-z][A-Za-z0-9-]*)*)\s*$/.exec(text);
      const headers =
        claim?.[2]
          ?.split(',')
          .map((name) => name.trim())
          .filter((name) => name !== '') ?? [];
      return { line, command: text.trim(), status: claim ? Number(claim[1]) : undefined, headers };
    });
}

/**
 * Runs one shell line. curl reports each transfer's status through a .curlrc of the test's own (CURL_HOME),
 * so the command runs exactly as written, but for the port.
 */
function runShell(command: string, curlHome: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      '/bin/sh',
      ['-c', command],
      { env: { PATH: process.env.PATH ?? '', CURL_HOME: curlHome }, timeout: 30_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A shell line without its trailing comment (a ` #` outside quotes, as the README writes them). */
function withoutComment(text: string): string {
  return text.replace(/\s#[^'"]*$/, '');
}

const STATUS_MARK = /@@readme-test status=(\d{3})@@/g;

t.test('the README has examples, each claiming a status', async (t) => {
  const examples = examplesOf(readme);
  t.ok(examples.length >= 8, `README.md has ${examples.length} curl -g examples`);
  for (const example of examples) {
    t.not(example.status, undefined, `README.md:${example.line} claims the status it gets: ${example.command}`);
  }
  // Every example against the service is one the test runs: a line that talks to it without `curl -g` would go unchecked.
  const unchecked = shellLines(readme).filter(
    ({ text }) => withoutComment(text).includes(README_ORIGIN) && !text.trimStart().startsWith('curl -g '),
  );
  t.same(unchecked, [], 'every shell line that talks to the service is a curl -g line');
});

t.test("the README's examples run as written against a fresh service with demo data", async (t) => {
  const examples = examplesOf(readme);
  const database = await testDatabase(t);
  const port = await freePort();
  // A fresh, empty database: the service migrates it and seeds the demo collections, as `npm start` does.
  const server = await startServer(t, port, { DATABASE_URL: database.url });
  const curlHome = mkdtempSync(path.join(tmpdir(), 'readme-curl-'));
  t.teardown(() => rmSync(curlHome, { recursive: true, force: true }));
  writeFileSync(path.join(curlHome, '.curlrc'), 'write-out = "\\n@@readme-test status=%{http_code}@@\\n"\n');

  for (const example of examples) {
    const command = example.command.replaceAll(README_ORIGIN, `localhost:${port}`);
    const { code, stdout, stderr } = await runShell(command, curlHome);
    const where = `README.md:${example.line}: ${example.command}`;
    const statuses = [...stdout.matchAll(STATUS_MARK)].map((match) => Number(match[1]));
    const detail = { stdout: stdout.slice(0, 2000), stderr: stderr.slice(0, 2000), server: server.output().slice(-2000) };
    t.equal(code, 0, `exits 0: ${where}`, detail);
    // The command's own curl is the last to finish: a line may fetch something first, in $(…).
    t.equal(statuses.at(-1), example.status, `answers ${example.status}: ${where}`, detail);
    for (const header of example.headers) {
      t.match(stdout, new RegExp(`^${header}:`, 'im'), `sends ${header}: ${where}`, detail);
    }
  }
});

// Every relative link of README.md and docs/ is checked by tests/docs/links.unit.test.ts.

t.test('no reference outside the repository', async (t) => {
  // The documents kept beside the repository, never part of it: cited by name, they lead nowhere for a reader.
  // Built from parts, so that this file does not name them itself; `docs/…` paths are the project's own pages.
  const pattern = new RegExp(String.raw`(?<!docs/)\b(?:${['API', 'SPEC', 'NOTES'].join('|')})\.md\b`);
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((file) => file !== '');
  t.ok(files.length > 50, `${files.length} files in the repository`);
  const mentions: string[] = [];
  for (const file of files) {
    const full = path.join(root, file);
    if (!existsSync(full)) continue; // deleted in the work tree, not yet in the index
    const text = readFileSync(full, 'utf8');
    if (text.includes('\0')) continue; // binary
    text.split('\n').forEach((line, index) => {
      if (pattern.test(line)) mentions.push(`${file}:${index + 1}: ${line.trim().slice(0, 160)}`);
    });
  }
  t.same(mentions, [], 'files cite docs/<page>.md, never a document outside the repository');
});
