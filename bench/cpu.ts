// CPU time of processes read from /proc/<pid>/stat, so the service itself needs no endpoint to report it.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Clock ticks per second of utime/stime; 100 on every common Linux, asked once in case it is not. */
const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of one process in microseconds; undefined when it is gone or /proc is not there. */
function cpuMicros(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1e6) / TICKS_PER_SECOND;
}

/** Whether `pid` is a local PostgreSQL process (not a namesake pid of another host or container). */
export function isLocalPostgres(pid: number): boolean {
  try {
    return /postgres/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
  } catch {
    return false;
  }
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
