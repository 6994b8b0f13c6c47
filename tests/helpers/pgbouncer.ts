// PgBouncer from Debian's package, started on a free port in transaction pooling mode with an ini the test
// writes in a temporary directory, in front of a PostgreSQL server; stopped and removed at teardown.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, stopProcess } from './processes.ts';
import { waitFor } from './wait.ts';

const BINARY = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  readonly port: number;
  /** `url` (a URL of the server behind it) with PgBouncer's host and port. */
  urlOf(url: string): string;
  /** PgBouncer's log so far. */
  log(): Promise<string>;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => resolve(true)).once('error', () => resolve(false));
    socket.once('close', () => socket.destroy());
    socket.setTimeout(1000, () => socket.destroy());
    socket.once('connect', () => socket.end());
  });
}

/**
 * PgBouncer in transaction pooling mode in front of the server of `serverUrl`, every database to that
 * server logged in as its user, with its password if it has one (`auth_type = any`: clients are not asked). PgBouncer refuses to
 * run as root: as root it runs as `postgres`, in a directory that user owns.
 */
export async function startPgBouncer(t: { teardown(fn: () => unknown): void }, serverUrl: string): Promise<PgBouncer> {
  if (!existsSync(BINARY)) throw new Error(`PgBouncer: ${BINARY} is missing; install Debian's pgbouncer (npm test does, as root)`);
  const server = new URL(serverUrl);
  const port = await freePort();
  const dir = await mkdtemp('/tmp/pgbouncer-');
  const logFile = path.join(dir, 'pgbouncer.log');
  // The server's password, when its URL has one (the embedded PostgreSQL asks for it), is PgBouncer's to send.
  const password = server.password ? ` password=${decodeURIComponent(server.password)}` : '';
  const ini = `[databases]
* = host=${server.hostname} port=${server.port || 5432} user=${decodeURIComponent(server.username) || 'postgres'}${password}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
; Stands in for the statement_timeout a pooled connection cannot set at connect.
query_timeout = 10
logfile = ${logFile}
`;
  await writeFile(path.join(dir, 'pgbouncer.ini'), ini);
  // As root, PgBouncer itself is started as `postgres` (not through runuser, which would not pass the stop
  // signal on and leave PgBouncer running after the test).
  const user = process.getuid?.() === 0 ? { uid: Number(await idOf('-u')), gid: Number(await idOf('-g')) } : undefined;
  if (user) await chown(dir, user.uid, user.gid);
  const child = spawn(BINARY, [path.join(dir, 'pgbouncer.ini')], { stdio: 'ignore', ...user });
  t.teardown(async () => {
    await stopProcess(child, { signal: 'SIGINT', graceMs: 3000 });
    await rm(dir, { recursive: true, force: true });
  });
  const log = () => readFile(logFile, 'utf8').catch(() => '');
  await waitFor('PgBouncer to listen', async () => {
    if (child.exitCode !== null) throw new Error(`PgBouncer exited with ${child.exitCode}:\n${await log()}`);
    return accepts(port);
  });
  return {
    port,
    urlOf(url) {
      const pooled = new URL(url);
      pooled.hostname = '127.0.0.1';
      pooled.port = String(port);
      return pooled.toString();
    },
    log,
  };
}

async function idOf(flag: '-u' | '-g'): Promise<string> {
  return (await promisify(execFile)('id', [flag, 'postgres'])).stdout.trim();
}
