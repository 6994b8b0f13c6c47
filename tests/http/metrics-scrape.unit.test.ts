// The request path's metrics are counted in plain tallies and handed to prom-client at scrape time
// (lib/http/metrics.ts): what a scrape shows must be what prom-client's own Counter and Histogram would show
// for the same events, scrape after scrape.
import { Counter, Histogram, Registry } from 'prom-client';
import t from 'tap';
import { createMetrics } from '../../lib/http/metrics.ts';

const NAMES = [
  'http_requests_total',
  'http_request_duration_seconds',
  'ratelimit_decisions_total',
  'ratelimit_decision_duration_seconds',
  'ratelimit_statement_requests',
];

/** The samples of the named metrics in a scrape, one per line, without HELP and TYPE. */
function samples(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => NAMES.some((name) => line.startsWith(`${name}{`) || line.startsWith(`${name}_`) || line.startsWith(`${name} `)));
}

/** prom-client's own metrics of the same names, labels and buckets, fed the same events. */
function reference() {
  const registry = new Registry();
  const registers = [registry];
  const requests = new Counter({ name: 'http_requests_total', help: '-', labelNames: ['route', 'method', 'status'], registers });
  const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
  const duration = new Histogram({ name: 'http_request_duration_seconds', help: '-', labelNames: ['route'], buckets, registers });
  const decisions = new Counter({ name: 'ratelimit_decisions_total', help: '-', labelNames: ['outcome'], registers });
  const decisionBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5];
  const waits = new Histogram({ name: 'ratelimit_decision_duration_seconds', help: '-', buckets: decisionBuckets, registers });
  const batches = new Histogram({
    name: 'ratelimit_statement_requests',
    help: '-',
    buckets: [0, 1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers,
  });
  return {
    registry,
    request(route: string, method: string, status: number, seconds: number) {
      requests.inc({ route, method, status });
      duration.observe({ route }, seconds);
    },
    refused(method: string, status: number) {
      requests.inc({ route: 'refused', method, status });
    },
    decided(outcome: string, seconds: number) {
      decisions.inc({ outcome });
      waits.observe(seconds);
    },
    statement(count: number) {
      batches.observe(count);
    },
  };
}

t.test('a scrape shows what prom-client would, and the next one adds only what came since', async (t) => {
  const ours = createMetrics({});
  const theirs = reference();
  // Values on bucket bounds (which count in that bucket), between them, past the last, and 0.
  const durations = [0, 0.001, 0.0011, 0.0025, 0.003, 0.01, 0.2, 2.5, 9.9, 10, 11, 42];
  const events = (round: number) => {
    durations.forEach((seconds, i) => {
      const route = i % 3 === 0 ? '/v1/*' : '/v1/:collection';
      const status = i % 4 === 0 ? 429 : 200;
      ours.request(route, 'GET', status, seconds * round);
      theirs.request(route, 'GET', status, seconds * round);
      ours.decided(status === 429 ? 'rate' : 'ok', seconds / 100);
      theirs.decided(status === 429 ? 'rate' : 'ok', seconds / 100);
      ours.statement(i * round);
      theirs.statement(i * round);
    });
    ours.refused('host', 'HEAD', 400);
    theirs.refused('HEAD', 400);
  };
  events(1);
  t.same(samples(await ours.registry.metrics()), samples(await theirs.registry.metrics()), 'the first scrape');
  events(2);
  events(3);
  const second = samples(await ours.registry.metrics());
  t.same(second, samples(await theirs.registry.metrics()), 'the second scrape: counted once each');
  t.same(
    second.filter((line) => line.startsWith('http_requests_total{route="/v1/:collection",method="GET",status="200"}')),
    ['http_requests_total{route="/v1/:collection",method="GET",status="200"} 18'],
    'six 200s a round, three rounds',
  );
  t.same(samples(await ours.registry.metrics()), second, 'a scrape with nothing since changes nothing');
});
