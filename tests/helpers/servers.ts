// Real server processes (server.ts, or the Deno and Bun entries) on one database, for tests across instances.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { childEnv, stopProcess } from './processes.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface ServerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything the process wrote, for failure messages. */
  output(): string;
}

export type Runtime = 'node' | 'deno' | 'bun';

/** Each runtime's entry of the service. */
const entries: Record<Runtime, string> = { node: 'server.ts', deno: 'server.deno.ts', bun: 'server.bun.ts' };

/**
 * The flags Node runs the service with, as `npm start` and the image give them (package.json, Dockerfile): a young
 * generation capped at 8 MB a semi-space (docs/reference/configuration.md, "Node.js flags").
 */
export const NODE_FLAGS = ['--max-semi-space-size=8'];

/** The command that runs `entry` on `runtime`; Deno and Bun are the binaries their npm packages install. */
export function runtimeCommand(runtime: Runtime, entry: string): [string, string[]] {
  if (runtime === 'deno') return [path.join(root, 'node_modules/.bin/deno'), ['run', '-A', entry]];
  if (runtime === 'bun') return [path.join(root, 'node_modules/.bin/bun'), [entry]];
  return [process.execPath, [...NODE_FLAGS, entry]];
}

/** Starts the entry of `runtime` (Node's `server.ts` by default) on `port` and resolves once it listens; it is stopped at teardown. */
export async function startServer(
  t: { teardown(fn: () => unknown): void },
  port: number,
  env: Record<string, string>,
  runtime: Runtime = 'node',
): Promise<ServerProcess> {
  const [command, args] = runtimeCommand(runtime, entries[runtime]);
  const child = spawn(command, args, {
    cwd: root,
    // HOME: Deno keeps its cache under it. NO_COLOR: plain output to read.
    // COLLECTIONS=demo: the tests' servers serve the demo unless a test names a file (or '' for none).
    env: childEnv({ HOME: process.env.HOME ?? '/tmp', NO_COLOR: '1', COLLECTIONS: 'demo', ...env, PORT: String(port) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  t.teardown(() => stopProcess(child, { graceMs: 5_000 }));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Server on ${port} did not start:\n${output}`)), 60_000);
    const check = () => {
      if (output.includes('Listening on')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`Server on ${port} exited with ${code}:\n${output}`));
    });
  });
  return { url: `http://127.0.0.1:${port}`, child, output: () => output };
}
