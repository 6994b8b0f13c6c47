// CPU time of processes read from /proc/<pid>/stat, so the service itself needs no endpoint to report it.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Sql } from 'postgres';

/** Clock ticks per second of utime/stime; 100 on every common Linux, asked once in case it is not. */
const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** When this host booted, in milliseconds since the epoch (`btime` of /proc/stat); undefined without /proc. */
const BOOTED_AT_MS = (() => {
  try {
    const seconds = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1];
    return seconds === undefined ? undefined : Number(seconds) * 1000;
  } catch {
    return undefined;
  }
})();

/**
 * The fields of /proc/<pid>/stat after the command name, from field 3 (state) on: [1] is the parent's pid,
 * [11] and [12] utime and stime, [19] the start time in ticks since boot. Undefined when the process is gone
 * or /proc is not there.
 */
function statFields(pid: number): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of one process (all its threads) in microseconds; undefined when it is gone or /proc is not there. */
function cpuMicros(pid: number): number | undefined {
  const fields = statFields(pid);
  if (!fields) return undefined;
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS_PER_SECOND;
}

/** The pid of `pid`'s parent, from /proc; undefined when it is gone. */
export function parentOf(pid: number): number | undefined {
  const parent = statFields(pid)?.[1];
  return parent === undefined ? undefined : Number(parent);
}

/** When `pid` started, in milliseconds since the epoch (to the tick); undefined when it is gone. */
export function startedAt(pid: number): number | undefined {
  const ticks = statFields(pid)?.[19];
  return ticks === undefined || BOOTED_AT_MS === undefined ? undefined : BOOTED_AT_MS + (Number(ticks) * 1000) / TICKS_PER_SECOND;
}

/** Whether `pid` is a local PostgreSQL process (not a namesake pid of another host or container). */
function isLocalPostgres(pid: number): boolean {
  try {
    return /postgres/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * How far the postmaster's start time read from /proc may be from the cluster's own `pg_postmaster_start_time()`,
 * which the postmaster records once its configuration is read and its shared memory set up, a moment after it starts.
 */
const POSTMASTER_START_SLACK_MS = 10_000;

/**
 * The pid of the postmaster of the PostgreSQL cluster that `sql` is connected to, when that cluster runs on this
 * host in this pid namespace; undefined otherwise (another host, a container with pids of its own, no /proc).
 * It is the parent of the connection's own backend (`pg_backend_pid()`), held to it: a postgres process that
 * started when the cluster says its postmaster did, and the parent of every other process of the cluster that
 * `pg_stat_activity` lists (its backends, checkpointer, WAL writer…). The processes counted are then its
 * children only: never those of another cluster on the same host (a test run's), nor a namesake pid.
 */
export async function postmasterOf(sql: Sql): Promise<number | undefined> {
  const [own] = await sql`
    select pg_backend_pid() as pid, (extract(epoch from pg_postmaster_start_time()) * 1000)::float8 as started`;
  const listed = await sql`select pid from pg_stat_activity where pid <> pg_backend_pid()`;
  const backend = own!.pid as number;
  const postmaster = parentOf(backend);
  if (postmaster === undefined || !isLocalPostgres(backend) || !isLocalPostgres(postmaster)) return undefined;
  const started = startedAt(postmaster);
  if (started === undefined || Math.abs(started - (own!.started as number)) > POSTMASTER_START_SLACK_MS) return undefined;
  // A process listed that has exited since (a parallel worker, a closed connection) has no parent left to check.
  const parents = listed.map((row) => parentOf(row.pid as number)).filter((parent) => parent !== undefined);
  return parents.every((parent) => parent === postmaster) ? postmaster : undefined;
}

/** CPU per process at one moment, to subtract from a later snapshot. */
export type CpuSnapshot = Map<number, number>;

export function snapshot(pids: Iterable<number>): CpuSnapshot {
  const result: CpuSnapshot = new Map();
  for (const pid of pids) {
    const micros = cpuMicros(pid);
    if (micros !== undefined) result.set(pid, micros);
  }
  return result;
}

/**
 * CPU spent between two snapshots, summed over processes. A process that appeared in between counts from
 * zero (it started during the interval); one that ended in between is lost, which is why the caller keeps
 * the measured processes alive across an interval.
 */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): number {
  let total = 0;
  for (const [pid, micros] of after) total += micros - (before.get(pid) ?? 0);
  return total;
}

/**
 * The local ports of the TCP connections `pid` holds (its database connections among them), from its file
 * descriptors and its network namespace's socket tables; empty when /proc is not there or not readable.
 */
export function tcpPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const target = (() => {
        try {
          return readlinkSync(`/proc/${pid}/fd/${fd}`);
        } catch {
          return ''; // closed between the listing and the read
        }
      })();
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) inodes.add(inode);
    }
  } catch {
    return new Set();
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    // "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …"
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 9 && inodes.has(fields[9]!)) ports.add(Number.parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}
