// `tsx bench/storm-attacker.ts <origin> <path> <connections per key> <key>...`: the storm of bench/storm-cost.ts,
// in a process of its own, as hostile clients are on other machines: their own client-side work (some 3,000
// responses a second) would otherwise queue the fourth client's requests in the measuring process's event
// loop, and its latency would measure the load generator rather than the service. Each key sends `path` from
// its connections with autocannon (as `npm run bench` does), each sending again as soon as it is answered,
// 429s included, until SIGTERM. Prints `started` once they run, and at the end
// `{ "key1": { status: count } ... }`, each on a line of stdout.
import autocannon from 'autocannon';

const [origin, path, connectionsText, ...keys] = process.argv.slice(2);
if (!origin || !path || !connectionsText || keys.length === 0) {
  console.error('Usage: tsx bench/storm-attacker.ts <origin> <path> <connections per key> <key>...');
  process.exit(2);
}

const results: Promise<Record<number, number>>[] = [];
const runs = keys.map((key) => {
  let done: (counts: Record<number, number>) => void = () => {};
  let failed: (error: unknown) => void = () => {};
  results.push(
    new Promise((resolve, reject) => {
      done = resolve;
      failed = reject;
    }),
  );
  const options = { url: `${origin}${path}`, connections: Number(connectionsText), headers: { authorization: `Bearer ${key}` } };
  // Until stopped: autocannon's duration, in seconds, is an hour.
  return autocannon({ ...options, duration: 3600 }, (error, result) => {
    if (error) return failed(error);
    const counts: Record<number, number> = {};
    for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {})) counts[Number(status)] = count ?? 0;
    if (result.errors > 0) counts[0] = result.errors;
    done(counts);
  });
});

process.stdout.write('started\n');
process.once('SIGTERM', async () => {
  for (const run of runs) run.stop();
  const served = Object.fromEntries((await Promise.all(results)).map((counts, i) => [`key${i + 1}`, counts]));
  process.stdout.write(`${JSON.stringify(served)}\n`);
  process.exit(0);
});
