// The client runs unchanged on Node, Deno and Bun (npm's binaries), with each runtime's own fetch: a walk of
// a filtered collection under a tiny allowance returns every item once, and a bad request arrives typed.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { setTier } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';
import { runtimeCommand } from '../helpers/servers.ts';

const script = fileURLToPath(new URL('./walk.ts', import.meta.url));

function run(runtime: 'node' | 'deno' | 'bun', baseUrl: string): Promise<string> {
  const [command, args] = runtimeCommand(runtime, script);
  return new Promise((resolve, reject) => {
    execFile(command, [...args, baseUrl], { timeout: 60_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${runtime}: ${error.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

t.test('the client walks, waits and throws typed problems on Node, Deno and Bun alike', async (t) => {
  const api = await testApp(t, { seed: { products: 20, orders: 200 }, rateLimit: true });
  const baseUrl = await listening(t, api.app);
  const { sql } = api.database;
  const paid = (await sql`select id from demo.orders where status = 'paid' order by created_at desc, id desc`).map((row) => Number(row.id));
  t.ok(paid.length > 20, `${paid.length} paid orders: more chunks of 5 than the allowance has units`);
  // Every runtime's requests come from the same test address: 3 units a second make each walk meet 429s.
  await setTier(sql, 'anonymous', { allowance: 3, windowSeconds: 1, concurrency: 5 });

  for (const runtime of ['node', 'deno', 'bun'] as const) {
    const output = JSON.parse((await run(runtime, baseUrl)).trim().split('\n').at(-1)!);
    t.same(output.ids, paid, `${runtime}: every paid order once, in order`);
    t.ok(output.limited > 0, `${runtime}: it met ${output.limited} 429s and waited them out`);
    t.same(
      output.problem,
      {
        typed: true,
        code: 'invalid_parameter',
        status: 400,
        invalidParams: [{ name: 'limit', reason: 'must be an integer from 1 to 100' }],
      },
      `${runtime}: a bad request arrives as a ProblemError`,
    );
  }
});
