// What the bench's hand-written servers (the floor, the Fastify peer) are checked on against the service: products
// that make a chunk by price hard to print alike, and a cursor's payload read without its signature.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Sql } from 'postgres';
import { childEnv, freePort, stopProcess } from './processes.ts';
import { waitFor } from './wait.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Starts one of the bench's servers (`entry`, e.g. bench/floor-server.ts) with `env` on a free port, resolving once
 * /readyz answers: its origin, what it printed, and its stop (SIGTERM). Stopped at teardown.
 */
export async function startBenchServer(
  t: { teardown(fn: () => unknown): void },
  entry: string,
  env: Record<string, string>,
): Promise<{ origin: string; output(): string; stop(): Promise<unknown> }> {
  const port = await freePort();
  const server = spawn(process.execPath, [entry], {
    cwd: root,
    env: childEnv({ ...env, PORT: String(port) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  server.stdout.on('data', (chunk) => (output += chunk));
  server.stderr.on('data', (chunk) => (output += chunk));
  t.teardown(() => stopProcess(server));
  const origin = `http://127.0.0.1:${port}`;
  await waitFor(`${entry} on ${port} (${output})`, () =>
    fetch(`${origin}/readyz`).then(
      (response) => response.ok,
      () => false,
    ),
  );
  return { origin, output: () => output, stop: () => stopProcess(server) };
}

/**
 * 30 products with ties on the price (the id decides), timestamps at the ends of the range and with trailing
 * zeros in the fraction, and text that JSON must escape.
 */
export async function seedTrickyProducts(sql: Sql): Promise<void> {
  const timestamps = [
    '0001-01-01T00:00:00.000000Z',
    '9999-12-31T23:59:59.999999Z',
    '2025-06-08T06:53:58.547370Z',
    '2025-01-01T00:00:00.100000Z',
    '2025-01-01T00:00:00.000001Z',
    '1970-01-01T00:00:00.000000Z',
  ];
  const rows = Array.from({ length: 30 }, (_, i) => ({
    name: i % 7 === 0 ? `Quote "${i}" \\ é ☃\ttab` : `Item ${i}`,
    category: ['books', 'toys'][i % 2]!,
    price_cents: 100 + (i % 3),
    created_at: timestamps[i % timestamps.length]!,
  }));
  await sql`insert into demo.products ${sql(rows)}`;
}

/** A cursor's payload, the middle part of `v1.<payload>.<signature>` (each server signs with its own secret). */
export function cursorPayload(href: string): unknown {
  const cursor = new URL(href).searchParams.get('cursor')!;
  return JSON.parse(Buffer.from(cursor.split('.')[1]!, 'base64url').toString('utf8'));
}
