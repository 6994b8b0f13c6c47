// Redocly CLI's `recommended` ruleset and Spectral's `spectral:oas` over a document, as installed (node_modules/.bin),
// on the document written to a file, with nothing fetched: Redocly's telemetry and update check are off.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';

const bin = (name: string) => fileURLToPath(new URL(`../../node_modules/.bin/${name}`, import.meta.url));

/** Runs a command (a linter, a script) to its end in `cwd`: its exit status and output; for a linter the report is the verdict. */
export function run(command: string, args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env, timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ code: typeof error?.code === 'number' ? error.code : error ? 1 : 0, stdout, stderr });
    });
  });
}

/** Asserts that both linters find neither an error nor a warning in `document`. */
export async function lintsClean(t: Test, document: object): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'openapi-lint-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'openapi.json');
  await writeFile(file, JSON.stringify(document, null, 2));

  const redocly = await run(bin('redocly'), ['lint', '--extends', 'recommended', '--format', 'json', file], dir);
  const report = JSON.parse(redocly.stdout) as {
    totals: { errors: number; warnings: number };
    problems: { ruleId: string; message: string }[];
  };
  const redoclyProblems = report.problems.map((p) => `${p.ruleId}: ${p.message}`);
  t.equal(report.totals.errors, 0, 'Redocly: no error', { problems: redoclyProblems });
  t.equal(report.totals.warnings, 0, 'Redocly: no warning', { problems: redoclyProblems });
  t.equal(redocly.code, 0, 'Redocly exits 0', { stderr: redocly.stderr });

  const ruleset = path.join(dir, '.spectral.yaml');
  await writeFile(ruleset, 'extends: ["spectral:oas"]\n');
  const results = path.join(dir, 'spectral.json');
  const spectral = await run(bin('spectral'), ['lint', '--ruleset', ruleset, '--format', 'json', '--output', results, file], dir);
  t.equal(spectral.code, 0, 'Spectral exits 0', { stdout: spectral.stdout, stderr: spectral.stderr });
  // Spectral's severities: 0 error, 1 warning, 2 information, 3 hint.
  const found = JSON.parse(await readFile(results, 'utf8')) as { code: string; message: string; severity: number; path: string[] }[];
  const spectralProblems = found.map((r) => `${r.code} at ${r.path.join('.')}: ${r.message}`);
  t.equal(found.filter((r) => r.severity === 0).length, 0, 'Spectral: no error', { problems: spectralProblems });
  t.equal(found.filter((r) => r.severity === 1).length, 0, 'Spectral: no warning', { problems: spectralProblems });
}
