// `npm run collections -- …` (scripts/collections.ts) run as the operator runs it: a child process of its own.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { childEnv } from './processes.ts';

const SCRIPT = fileURLToPath(new URL('../../scripts/collections.ts', import.meta.url));

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The script with `args`, in `cwd`, with only PATH, the suite's compile cache and `env` in its environment (childEnv: no DATABASE_URL nor COLLECTIONS of ours). */
export function runCollections(args: readonly string[], env: Record<string, string>, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SCRIPT, ...args], { cwd, env: childEnv(env) });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
