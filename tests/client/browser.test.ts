// The client runs unchanged in a browser: bundled as it is (esbuild, no shims) into a page on another origin
// that headless Chromium (Debian's) opens, it walks a filtered collection under a tiny allowance, waiting out
// its 429s from the headers CORS lets it read, and a bad request arrives as a ProblemError.
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { pageResults } from '../helpers/browser.ts';
import { setTier } from '../helpers/limiter.ts';
import { listening } from '../helpers/listening.ts';

t.test('in a browser, the client walks, waits out 429s and throws typed problems', async (t) => {
  const api = await testApp(t, { seed: { products: 20, orders: 200 }, rateLimit: true });
  const apiOrigin = await listening(t, api.app);
  const { sql } = api.database;
  const paid = (await sql`select id from demo.orders where status = 'paid' order by created_at desc, id desc`).map((row) => Number(row.id));
  await setTier(sql, 'anonymous', { allowance: 3, windowSeconds: 1, concurrency: 5 });

  const bundle = await build({
    entryPoints: [fileURLToPath(new URL('../../client/index.ts', import.meta.url))],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
  });
  const script = `
    import { createClient, ProblemError } from '/client.js';
    let limited = 0;
    const client = createClient({
      baseUrl: ${JSON.stringify(apiOrigin)},
      maxRetries: 50,
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        if (response.status === 429) limited++;
        return response;
      },
    });
    try {
      const ids = [];
      for await (const order of client.list('orders', { status: 'paid', 'page-size': 5 })) ids.push(order.id);
      let problem;
      try {
        for await (const _ of client.list('products', { limit: 500 }).chunks()) break;
      } catch (error) {
        problem = error instanceof ProblemError ? { code: error.code, status: error.status } : String(error);
      }
      window.results = { ids, limited, problem };
    } catch (error) {
      window.results = String(error);
    }`;
  const results = (await pageResults(t, `<!doctype html><title>client</title><script type="module">${script}</script>`, {
    scripts: { '/client.js': bundle.outputFiles[0]!.text },
    timeoutMs: 60_000,
  })) as { ids: number[]; limited: number; problem: unknown };
  t.same(results.ids, paid, 'every paid order once, in order');
  t.ok(results.limited > 0, `it met ${results.limited} 429s and waited them out`);
  t.same(results.problem, { code: 'invalid_parameter', status: 400 }, 'a bad request arrives as a ProblemError');
});
