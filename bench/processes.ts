// Server processes under test: started on 127.0.0.1 ports 4300-4399, awaited until ready, always stopped.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** A differently configured server process that scenarios can target by name. */
export interface ServerVariant {
  name: string;
  /** Entry file, relative to the project root; run as `node --import tsx <entry>`. */
  entry: string;
  /** Extra environment on top of the bench's own, PORT and DATABASE_URL. */
  env?: Record<string, string>;
  /** GET path that answers 200 once the server can take traffic. */
  readyPath: string;
  /** Runs once the server is ready, before any scenario: e.g. configure it through its own API. */
  setup?: (origin: string) => Promise<void>;
}

export interface RunningServer {
  readonly variant: ServerVariant;
  readonly pid: number;
  /** http://127.0.0.1:<port>: the bench sends traffic nowhere else. */
  readonly origin: string;
  stop(): Promise<void>;
}

const projectRoot = fileURLToPath(new URL('..', import.meta.url));
const PORTS = { first: 4300, last: 4399 } as const;
const taken = new Set<number>();

/** Whether nothing listens on `port`, on any address (the service binds all of them). */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, () => probe.close(() => resolve(true)));
  });
}

/** A free port in our range; other people share the machine, so never assume a fixed one. */
export async function choosePort(): Promise<number> {
  for (let port = PORTS.first; port <= PORTS.last; port++) {
    if (taken.has(port) || !(await portIsFree(port))) continue;
    taken.add(port);
    return port;
  }
  throw new Error(`No free port from ${PORTS.first} to ${PORTS.last}`);
}

/** The last lines a child printed, to show when it fails to start. */
function outputTail(child: ChildProcess): () => string {
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.on('error', (error) => keep(Buffer.from(`\n${error.message}`)));
  return () => tail.trim();
}

async function waitUntilReady(child: ChildProcess, url: string, tail: () => string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${tail()}`);
    }
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`not ready after ${timeoutMs / 1000} s:\n${tail()}`);
}

/** SIGTERM (the service drains and closes its pool), then SIGKILL if it lingers. */
function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Starts one variant against `databaseUrl` and resolves once its ready path answers 200. */
export async function startServer(variant: ServerVariant, databaseUrl: string, timeoutMs = 180_000): Promise<RunningServer> {
  const port = await choosePort();
  const env = { ...process.env, ...variant.env, PORT: String(port), DATABASE_URL: databaseUrl };
  const child = spawn(process.execPath, ['--import', 'tsx', variant.entry], {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`Server ${variant.name}: could not spawn ${variant.entry}`);
  const running: RunningServer = {
    variant,
    pid: child.pid,
    origin: `http://127.0.0.1:${port}`,
    stop: () => stopChild(child),
  };
  try {
    await waitUntilReady(child, `${running.origin}${variant.readyPath}`, outputTail(child), timeoutMs);
    await variant.setup?.(running.origin);
  } catch (error) {
    await running.stop();
    throw new Error(`Server ${variant.name} (${variant.entry}) ${(error as Error).message}`);
  }
  return running;
}
