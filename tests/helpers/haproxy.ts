// A real HAProxy (Debian's /usr/sbin/haproxy) in front of instances, with health checks on /readyz.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, stopProcess } from './processes.ts';
import { waitFor } from './wait.ts';

const HAPROXY = '/usr/sbin/haproxy';

export interface HaproxyOptions {
  /** The instances' ports on 127.0.0.1, named s1, s2, … in order. */
  readonly servers: readonly number[];
  /** Time between two health checks of a server (ms); `fall` failed checks mark it down, `rise` good ones up. */
  readonly interMs: number;
  readonly fall: number;
  readonly rise: number;
}

export interface Haproxy {
  /** The balancer's own address: http://127.0.0.1:<port>. */
  readonly url: string;
  /** Each server's state as HAProxy sees it: `UP`, `DOWN`, or a transition such as `UP 1/2`. */
  states(): Promise<Record<string, string>>;
  /** Resolves once HAProxy has `server` in `state`. */
  until(server: string, state: 'UP' | 'DOWN', timeoutMs?: number): Promise<void>;
  output(): string;
  stop(): Promise<unknown>;
}

/**
 * The configuration: round robin over the servers, each checked as a balancer in production checks it:
 * GET /readyz, HTTP/1.1 with a Host, 200 expected.
 * No retries elsewhere (`option redispatch` is off): a request sent to an instance that fails it is a failure
 * the client sees, which is what the test counts.
 */
function config(port: number, socket: string, options: HaproxyOptions): string {
  return [
    'global',
    `  stats socket ${socket} mode 600 level admin`,
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 30s',
    '  timeout server 30s',
    'frontend api',
    `  bind 127.0.0.1:${port}`,
    '  default_backend instances',
    'backend instances',
    '  balance roundrobin',
    '  option httpchk',
    '  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost',
    '  http-check expect status 200',
    `  default-server inter ${options.interMs}ms fall ${options.fall} rise ${options.rise}`,
    ...options.servers.map((server, i) => `  server s${i + 1} 127.0.0.1:${server} check`),
    '',
  ].join('\n');
}

/** One command on HAProxy's stats socket; resolves with its whole answer. */
function ask(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const connection = connect(socket, () => connection.end(`${command}\n`));
    connection.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    connection.on('end', () => resolve(answer));
    connection.on('error', reject);
  });
}

/** Starts HAProxy with a configuration it writes to a temporary folder; both are gone at teardown. */
export async function startHaproxy(t: { teardown(fn: () => unknown): void }, options: HaproxyOptions): Promise<Haproxy> {
  const dir = await mkdtemp(path.join(tmpdir(), 'haproxy-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const port = await freePort();
  const socket = path.join(dir, 'admin.sock');
  const file = path.join(dir, 'haproxy.cfg');
  await writeFile(file, config(port, socket, options));
  // -db: in the foreground, not as a daemon, so the test owns the process.
  const child = spawn(HAPROXY, ['-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  t.teardown(() => stopProcess(child, { graceMs: 3000 }));

  async function states(): Promise<Record<string, string>> {
    const [header, ...rows] = (await ask(socket, 'show stat')).trim().split('\n');
    const columns = header!.replace(/^# /, '').split(',');
    const [proxy, name, status] = ['pxname', 'svname', 'status'].map((column) => columns.indexOf(column));
    const result: Record<string, string> = {};
    for (const row of rows) {
      const cells = row.split(',');
      if (cells[proxy!] === 'instances' && /^s\d+$/.test(cells[name!]!)) result[cells[name!]!] = cells[status!]!;
    }
    return result;
  }
  await waitFor(
    'HAProxy to answer on its stats socket',
    () => {
      if (child.exitCode !== null) throw new Error(`HAProxy exited (${child.exitCode}):\n${output}`);
      return states().catch(() => undefined);
    },
    { timeoutMs: 10_000 },
  );
  return {
    url: `http://127.0.0.1:${port}`,
    states,
    async until(server, state, timeoutMs = 20_000) {
      await waitFor(`HAProxy to see ${server} ${state}`, states, { until: (now) => now[server] === state, timeoutMs, intervalMs: 25 });
    },
    output: () => output,
    stop: () => stopProcess(child, { graceMs: 3000 }),
  };
}
