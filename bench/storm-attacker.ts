// `tsx bench/storm-attacker.ts <origin> <path> <loops per key> <key>...`: the storm of bench/storm-cost.ts, in a
// process of its own, as hostile clients are on other machines: their own client-side work (some 1,600
// responses a second) would otherwise queue the fourth client's requests in the measuring process's event
// loop, and its latency would measure the load generator rather than the service. Each key sends `path`
// from its loops, ignoring 429s, until SIGTERM. Prints `started` once its loops run, and at the end
// `{ "key1": { status: count } ... }`, each on a line of stdout.
const [origin, path, loopsText, ...keys] = process.argv.slice(2);
if (!origin || !path || !loopsText || keys.length === 0) {
  console.error('Usage: tsx bench/storm-attacker.ts <origin> <path> <loops per key> <key>...');
  process.exit(2);
}

let stop = false;
const served: Record<string, Record<number, number>> = {};

async function attacker(key: string, name: string): Promise<void> {
  // The loops of one key count together.
  const counts = served[name] ?? {};
  served[name] = counts;
  while (!stop) {
    try {
      const res = await fetch(`${origin}${path}`, { headers: { authorization: `Bearer ${key}` } });
      await res.arrayBuffer();
      counts[res.status] = (counts[res.status] ?? 0) + 1;
    } catch {
      counts[0] = (counts[0] ?? 0) + 1;
    }
  }
}

const loops = keys.flatMap((key, i) => Array.from({ length: Number(loopsText) }, () => attacker(key, `key${i + 1}`)));
process.stdout.write('started\n');
process.once('SIGTERM', async () => {
  stop = true;
  await Promise.all(loops);
  process.stdout.write(`${JSON.stringify(served)}\n`);
  process.exit(0);
});
