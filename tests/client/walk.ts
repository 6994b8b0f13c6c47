// Run by tests/client/runtimes.test.ts on Node, Deno and Bun: the client as a user's script uses it, with the
// runtime's own fetch. Walks the paid orders, then makes a bad request; prints what it got as one JSON line.
import { createClient, ProblemError } from '../../client/index.ts';

const baseUrl = process.argv[2] ?? '';
let limited = 0;
// The runtime's own fetch, counting the 429s the client waits out.
const client = createClient({
  baseUrl,
  maxRetries: 50,
  fetch: async (input, init) => {
    const response = await fetch(input, init);
    if (response.status === 429) limited++;
    return response;
  },
});
const ids: number[] = [];
for await (const order of client.list('orders', { status: 'paid', 'page-size': 5 })) ids.push(order.id);
let problem: unknown;
try {
  for await (const _ of client.list('products', { limit: 500 }).chunks()) break;
} catch (error) {
  problem =
    error instanceof ProblemError
      ? { typed: true, code: error.code, status: error.status, invalidParams: error.invalidParams }
      : { typed: false, error: String(error) };
}
console.log(JSON.stringify({ ids, limited, problem }));
