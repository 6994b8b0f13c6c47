// Real server processes (server.ts) on one database, for tests across instances.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { alive } from '../../db/embedded.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

const PORTS = { first: 4200, last: 4299 } as const;
const handedOut = new Set<number>();

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, () => probe.close(() => resolve(true)));
  });
}

/**
 * Ports handed out, one file each, named by the port and holding the test process's pid: test files run
 * in parallel processes, and a port one of them probed free may be taken by another before its server
 * listens. A claim of a process that has ended is stale and taken over.
 */
const claims = path.join(tmpdir(), 'collections-test-ports');

function claim(port: number): boolean {
  mkdirSync(claims, { recursive: true });
  const file = path.join(claims, String(port));
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
  } catch {
    const owner = Number(readFileSync(file, 'utf8'));
    if (Number.isInteger(owner) && owner > 0 && alive(owner)) return false;
    writeFileSync(file, String(process.pid));
  }
  handedOut.add(port);
  return true;
}

process.once('exit', () => {
  for (const port of handedOut) rmSync(path.join(claims, String(port)), { force: true });
});

/**
 * A free port in our range (4200-4299) that no other test process holds, tried from a random start;
 * never the same port twice in one process.
 */
export async function freePort(): Promise<number> {
  const count = PORTS.last - PORTS.first + 1;
  const start = Math.floor(Math.random() * count);
  for (let i = 0; i < count; i++) {
    const port = PORTS.first + ((start + i) % count);
    if (handedOut.has(port) || !(await isFree(port)) || !claim(port)) continue;
    return port;
  }
  throw new Error(`No free port from ${PORTS.first} to ${PORTS.last}`);
}

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
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  });
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
