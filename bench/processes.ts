// Server processes under test: started on 127.0.0.1 ports 4300-4399, awaited until ready, always stopped.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from 'postgres';
import { freePort, type PortRange, stopProcess } from '../tests/helpers/processes.ts';
import { type Runtime, runtimeCommand } from '../tests/helpers/servers.ts';
import { waitFor } from '../tests/helpers/wait.ts';
import type { AllocReport } from './alloc-probe.ts';

/** A differently configured server process that scenarios can target by name. */
export interface ServerVariant {
  name: string;
  /** Entry file, relative to `root`; run as `node <entry>` unless `runtime` says otherwise. */
  entry: string;
  /** The checkout it runs from, its working directory (default this one): e.g. another commit's worktree (`--against`). */
  root?: string;
  /** The runtime that runs `entry` (default node): deno and bun are the binaries their npm packages install. */
  runtime?: Runtime;
  /** The DATABASE_URL this server gets, made from the bench database's (default: that URL as it is). */
  url?: (databaseUrl: string) => string;
  /** Extra environment on top of the bench's own, PORT and DATABASE_URL. */
  env?: Record<string, string>;
  /** GET path that answers 200 once the server can take traffic. */
  readyPath: string;
  /**
   * Keeps its state in the bench's Redis (REDIS_URL, or 127.0.0.1:6379; bench/redis.ts): started with that
   * REDIS_URL, its rows skipped when no Redis answers, and Redis's CPU counted in its rows.
   */
  redis?: boolean;
  /**
   * Runs before the server is started, with the bench database and the bench's progress log: e.g. seed the
   * tables it serves and write its collections file. What it returns is run when the bench stops.
   */
  prepare?: (database: { url: string; sql: Sql }, log: (line: string) => void) => Promise<(() => Promise<void>) | undefined>;
  /** Runs once the server is ready, before any scenario: e.g. configure it through its own API. */
  setup?: (origin: string) => Promise<void>;
}

export interface RunningServer {
  readonly variant: ServerVariant;
  readonly pid: number;
  /** http://127.0.0.1:<port>: the bench sends traffic nowhere else. */
  readonly origin: string;
  /** The last lines it printed (up to 4 KB), to show when a row fails. */
  output(): string;
  /** Its allocation probe (bench/alloc-probe.ts), when it was started with one. */
  readonly allocations?: AllocationProbe;
  stop(): Promise<void>;
}

/** A window of a server's allocations: `stop` resolves to the bytes allocated since `start`, estimated by V8's sampling. */
interface AllocationProbe {
  start(): Promise<void>;
  stop(): Promise<number>;
}

const projectRoot = fileURLToPath(new URL('..', import.meta.url));

/** The bench's ports, beside the tests' (tests/helpers/processes.ts). */
const BENCH_PORTS: PortRange = { first: 4300, last: 4399 };

/** A free port of the bench's range; other people share the machine, so never assume a fixed one. */
export function benchPort(): Promise<number> {
  return freePort(BENCH_PORTS);
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

const ALLOC_PROBE = fileURLToPath(new URL('alloc-probe.ts', import.meta.url));

/** The probe of the process `pid`, which reports to `file`: each SIGUSR2 starts or stops a window. */
function allocationProbe(pid: number, file: string): AllocationProbe {
  const signal = async <State extends AllocReport['state']>(state: State) => {
    rmSync(file, { force: true });
    process.kill(pid, 'SIGUSR2');
    const report = await waitFor(
      `the allocation probe of ${pid} to report ${state}`,
      () => {
        try {
          return JSON.parse(readFileSync(file, 'utf8')) as AllocReport;
        } catch {
          return undefined;
        }
      },
      {
        until: (report) => report !== undefined && (report.state === state || report.state === 'failed'),
        timeoutMs: 30_000,
        intervalMs: 20,
      },
    );
    if (report!.state === 'failed') throw new Error(`Allocation probe of ${pid}: ${report!.error}`);
    return report as Extract<AllocReport, { state: State }>;
  };
  return {
    start: async () => {
      await signal('sampling');
    },
    stop: async () => (await signal('done')).bytes,
  };
}

/** Resolves once `url` answers 200; fails at once if the child exits first. */
async function untilReady(child: ChildProcess, url: string, timeoutMs: number): Promise<void> {
  await waitFor(
    `${url} to answer 200`,
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`exited (${child.exitCode ?? child.signalCode}) before it was ready`);
      }
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
        await response.arrayBuffer();
        return response.status;
      } catch {
        return 'not listening yet';
      }
    },
    { until: (status) => status === 200, timeoutMs, intervalMs: 200 },
  );
}

/**
 * Starts one variant against `databaseUrl` and resolves once its ready path answers 200. With `allocations`, a
 * server on Node gets the allocation probe (bench/alloc-probe.ts); the others run as they would without it.
 */
export async function startServer(
  variant: ServerVariant,
  databaseUrl: string,
  { allocations = false, timeoutMs = 180_000 }: { allocations?: boolean; timeoutMs?: number } = {},
): Promise<RunningServer> {
  const port = await benchPort();
  const runtime = variant.runtime ?? 'node';
  const probed = allocations && runtime === 'node';
  const allocFile = path.join(tmpdir(), `bench-alloc-${process.pid}-${port}.json`);
  const env = {
    COLLECTIONS: 'demo',
    ...process.env,
    ...variant.env,
    PORT: String(port),
    DATABASE_URL: variant.url?.(databaseUrl) ?? databaseUrl,
    ...(probed ? { BENCH_ALLOC_FILE: allocFile } : {}),
  };
  const [command, args] = runtimeCommand(runtime, variant.entry);
  // The probe by its absolute path in this checkout, so that a server run from another commit's worktree gets the same one.
  const child = spawn(command, probed ? ['--import', ALLOC_PROBE, ...args] : args, {
    cwd: variant.root ?? projectRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`Server ${variant.name}: could not spawn ${variant.entry}`);
  const tail = outputTail(child);
  const running: RunningServer = {
    variant,
    pid: child.pid,
    origin: `http://127.0.0.1:${port}`,
    output: tail,
    ...(probed ? { allocations: allocationProbe(child.pid, allocFile) } : {}),
    // SIGTERM (the service drains and closes its pool), then SIGKILL if it lingers.
    stop: async () => {
      await stopProcess(child);
      rmSync(allocFile, { force: true });
      rmSync(`${allocFile}.tmp`, { force: true });
    },
  };
  try {
    await untilReady(child, `${running.origin}${variant.readyPath}`, timeoutMs);
    await variant.setup?.(running.origin);
  } catch (error) {
    await running.stop();
    throw new Error(`Server ${variant.name} (${variant.entry}): ${(error as Error).message}\n${tail()}`);
  }
  return running;
}

/**
 * The name and version of a runtime the bench starts servers on: Node.js is the binary running the bench
 * (servers are started with it), Deno and Bun the binaries their npm packages install.
 */
export function runtimeVersion(runtime: Runtime): string {
  if (runtime === 'node') return `Node.js ${process.version}`;
  const name = runtime === 'deno' ? 'Deno' : 'Bun';
  try {
    const output = execFileSync(runtimeCommand(runtime, '')[0], ['--version'], { encoding: 'utf8', timeout: 30_000 });
    // `deno --version`: "deno 2.5.6 (stable, release, x86_64-unknown-linux-gnu)" then V8's and TypeScript's; `bun --version`: "1.3.1".
    return `${name} ${/\d+\.\d+\.\d+\S*/.exec(output)?.[0] ?? output.trim()}`;
  } catch (error) {
    return `${name} (its version unknown: ${(error as Error).message.split('\n')[0]})`;
  }
}
