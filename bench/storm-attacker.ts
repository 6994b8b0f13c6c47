// `node bench/storm-attacker.ts <origin> <path> <connections per key> <seconds> <key>...`: the storm of
// bench/storm-cost.ts, in a process of its own, as hostile clients are on other machines: their own
// client-side work (some 5,000 responses a second) would otherwise queue the fourth client's requests in the
// measuring process's event loop, and its latency would measure the load generator rather than the service.
// Each key sends `path` from its connections with autocannon (as `npm run bench` does), each sending again as
// soon as it is answered, 429s included, for `seconds` (no longer, so that what each key is served falls in
// one window of its tier), or until SIGTERM or the end of stdin. Prints `started` once they run, and at the
// end `{ "served": { "key1": { status: count } ... }, "cpuMicros": n }` (its own CPU since `started`), each
// on a line of stdout.
import autocannon from 'autocannon';

const USAGE = 'Usage: node bench/storm-attacker.ts <origin> <path> <connections per key> <seconds> <key>...';
const [origin, path, connectionsText, secondsText, ...keys] = process.argv.slice(2);
if (!origin || !path || !connectionsText || !secondsText || keys.length === 0) {
  console.error(USAGE);
  process.exit(2);
}

const runs = keys.map((key) => {
  let instance: autocannon.Instance | undefined;
  const counts = new Promise<Record<number, number>>((resolve, reject) => {
    // VARY names a filter parameter each request gives a new value that selects every row (`VARY=priceCents[gte]`:
    // a random negative number), so that no two requests are one read the service could share
    // (docs/explanation/queries.md, "Identical reads share a statement"): the storm's worst case, each request its own statement.
    const vary = process.env.VARY;
    const requests: autocannon.Request[] | undefined = vary
      ? [{ setupRequest: (request) => ({ ...request, path: `${path}&${vary}=-${1 + Math.floor(Math.random() * 1e9)}` }) }]
      : undefined;
    const options = {
      url: `${origin}${path}`,
      connections: Number(connectionsText),
      headers: { authorization: `Bearer ${key}` },
      ...(requests ? { requests } : {}),
    };
    instance = autocannon({ ...options, duration: Number(secondsText) }, (error, result) => {
      if (error) return reject(error);
      const byStatus: Record<number, number> = {};
      for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {})) byStatus[Number(status)] = count ?? 0;
      if (result.errors > 0) byStatus[0] = result.errors;
      resolve(byStatus);
    });
  });
  return { instance: instance!, counts };
});

const cpuBefore = process.cpuUsage();
process.stdout.write('started\n');
const stop = () => {
  for (const { instance } of runs) instance.stop();
};
process.once('SIGTERM', stop);
// Should the bench die without stopping the storm, its end of this pipe closes: stop rather than run on.
process.stdin.once('end', stop).resume();
const served = Object.fromEntries((await Promise.all(runs.map(({ counts }) => counts))).map((counts, i) => [`key${i + 1}`, counts]));
const cpu = process.cpuUsage(cpuBefore);
process.stdout.write(`${JSON.stringify({ served, cpuMicros: cpu.user + cpu.system })}\n`);
process.exit(0);
