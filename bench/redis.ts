// The Redis the bench's Fastify peer keeps its rate-limit counters in (bench/peer-fastify.ts): REDIS_URL, or
// 127.0.0.1:6379. When none answers, the peer's rows are skipped; when one does on this host, its
// redis-server process is found so that its CPU is counted in those rows.
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { startedAt } from './cpu.ts';

const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export type FoundRedis =
  | {
      found: true;
      url: string;
      /** redis_version of `INFO server`. */
      version: string;
      /** The redis-server process, when it runs on this host (its CPU can then be read from /proc). */
      pid: number | undefined;
    }
  | { found: false; url: string; reason: string };

/** Whether `host` names this host (the bench reads CPU from this host's /proc only). */
function isLocalHost(host: string): boolean {
  return host === '' || host === 'localhost' || host === '[::1]' || host.startsWith('127.');
}

/**
 * The redis-server process of `INFO server`'s process_id, held to it: a redis-server (or valkey-server)
 * process of this host that started when Redis says it did (uptime_in_seconds). Undefined otherwise: a
 * Redis in a container with pids of its own, or on another host.
 */
function localProcess(info: Map<string, string>): number | undefined {
  const pid = Number(info.get('process_id'));
  const uptimeMs = Number(info.get('uptime_in_seconds')) * 1000;
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isFinite(uptimeMs)) return undefined;
  let command: string;
  try {
    command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return undefined;
  }
  if (!/(redis|valkey)-server/.test(command)) return undefined;
  const started = startedAt(pid);
  // uptime_in_seconds is whole seconds: allow them, and a moment for the process to set up.
  return started !== undefined && Math.abs(Date.now() - uptimeMs - started) < 5_000 ? pid : undefined;
}

/** Asks `url` (default REDIS_URL, or 127.0.0.1:6379) for `INFO server`, within a second; never throws. */
export async function findRedis(url = process.env.REDIS_URL || DEFAULT_REDIS_URL): Promise<FoundRedis> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // ioredis reports why a connection failed as an event (connect() then rejects with "Connection is closed").
  let failure: Error | undefined;
  client.on('error', (error: Error) => {
    failure ??= error;
  });
  try {
    await client.connect();
    const text = await client.info('server');
    const info = new Map(
      text
        .split(/\r?\n/)
        .filter((line) => line.includes(':'))
        .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1)] as const),
    );
    const local = isLocalHost(new URL(url).hostname);
    return { found: true, url, version: info.get('redis_version') ?? 'unknown', pid: local ? localProcess(info) : undefined };
  } catch (error) {
    return { found: false, url, reason: (failure ?? (error as Error)).message || String(error) };
  } finally {
    client.disconnect();
  }
}
