// Real server processes (server.ts) on one database, for tests across instances.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopProcess } from './processes.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface ServerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything the process wrote, for failure messages. */
  output(): string;
}

/** Starts `server.ts` on `port` and resolves once it listens; it is stopped at teardown. */
export async function startServer(
  t: { teardown(fn: () => unknown): void },
  port: number,
  env: Record<string, string>,
): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port) },
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
