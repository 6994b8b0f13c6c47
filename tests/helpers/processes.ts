// Child processes of the tests and the bench: a free port to give one, and stopping one.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { alive, portIsFree } from '../../db/embedded.ts';

/**
 * The environment of a child process a test starts: PATH, the suite's compile cache (NODE_COMPILE_CACHE, set by
 * `npm test`: each process would otherwise strip and compile the same TypeScript again), and `env`; nothing
 * else of the test's own, so that each test says what its child sees.
 */
export function childEnv(env: Record<string, string> = {}): Record<string, string> {
  const cache = process.env.NODE_COMPILE_CACHE;
  return { PATH: process.env.PATH ?? '', ...(cache === undefined ? {} : { NODE_COMPILE_CACHE: cache }), ...env };
}

export interface PortRange {
  readonly first: number;
  readonly last: number;
}

/** The tests' ports; the bench has a range of its own (bench/processes.ts). */
const TEST_PORTS: PortRange = { first: 4200, last: 4299 };

const handedOut = new Set<number>();

/**
 * Ports handed out, one file each, named by the port and holding the pid of the process that took it:
 * test files run in parallel processes (and other checkouts' tests and benches beside them), and a port
 * one of them probed free may be taken by another before its server listens. A claim of a process that
 * has ended is stale and taken over.
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
 * A port of `range` (the tests' 4200-4299 by default) that nothing listens on and no other process has
 * claimed, tried from a random start; never the same port twice in one process. The tests and the bench
 * each keep to a range of their own rather than a port the system picks (the README gives the bench's).
 */
export async function freePort(range: PortRange = TEST_PORTS): Promise<number> {
  const count = range.last - range.first + 1;
  const start = Math.floor(Math.random() * count);
  for (let i = 0; i < count; i++) {
    const port = range.first + ((start + i) % count);
    if (handedOut.has(port) || !(await portIsFree(port)) || !claim(port)) continue;
    return port;
  }
  throw new Error(`No free port from ${range.first} to ${range.last}`);
}

export interface StopOptions {
  /** The signal that asks the process to stop (default SIGTERM). */
  signal?: NodeJS.Signals;
  /** How long it may take before it is killed with SIGKILL (default 10 s). */
  graceMs?: number;
}

/**
 * Sends `signal`, then SIGKILL if the process is still running after `graceMs`; resolves with its exit
 * code once it has exited (null when a signal ended it). One that has exited already resolves at once.
 */
export function stopProcess(child: ChildProcess, options: StopOptions = {}): Promise<number | null> {
  const { signal = 'SIGTERM', graceMs = 10_000 } = options;
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.kill(signal);
  });
}
