// What a hostile client sends, on Node, Deno and Bun alike: a Host no URL can be made of is a 400 problem+json
// naming Host, answered before the rate limiter (nothing charged) and logged once as refused; methods and
// paths nobody serves add no series to /metrics.
import t from 'tap';
import { seedTable } from '../../demo/seed.ts';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { logLines } from '../helpers/logs.ts';
import { freePort } from '../helpers/processes.ts';
import { parseRaw, rawExchange } from '../helpers/raw-http.ts';
import { type Runtime, type ServerProcess, startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

/**
 * Hosts from which no URL can be made, or a different one than sent: each runtime built request.url its own way.
 * Then hosts WHATWG's URL takes but no link may start with: `"`, `,`, `;` and `<>` are the Link header's own
 * punctuation, the rest no host name's.
 */
const BAD_HOSTS = [
  'x:abc',
  '[::1',
  'a@b:c',
  'a b',
  'x/y',
  'x?y',
  'x#y',
  'exa%mple',
  'x:99999',
  'x:',
  'x.1',
  'a"b',
  'a"; rel="evil',
  'a,b',
  'a;b',
  'a<b>',
  "a'b",
  'a{b}',
  'a|b',
  'a`b',
  'a^b',
  'a!b',
  'a$b',
  'a*b',
  'a(b)',
];

const db = await testDatabase(t);
await seedTable(db.sql, 'products', 20);
// No 429 in the way: its series would be new.
await setTier(db.sql, 'anonymous', { allowance: 100_000, windowSeconds: 600, concurrency: 50 });
const runtimes: Runtime[] = ['node', 'deno', 'bun'];
const servers = new Map<Runtime, ServerProcess>();
for (const runtime of runtimes) {
  servers.set(runtime, await startServer(t, await freePort(), { DATABASE_URL: db.url, ADMIN_TOKEN }, runtime));
}

function portOf(server: ServerProcess): number {
  return Number(new URL(server.url).port);
}

/** The series of the service's own request metrics (the runtime's process metrics may come and go). */
async function requestSeries(server: ServerProcess): Promise<string[]> {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const text = await res.text();
  return text.split('\n').filter((line) => line.startsWith('http_'));
}

for (const runtime of runtimes) {
  const server = servers.get(runtime)!;
  t.test(`${runtime}: a malformed or missing Host is a 400 naming Host, not charged, logged once`, async (t) => {
    await db.sql`delete from paginated_collections.rate_windows`;
    const requests = [
      ...BAD_HOSTS.map((host) => `GET /v1/products?limit=2 HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`),
      // HTTP/1.0 may leave Host out; only the health checks are served without one (lib/http/target.ts).
      'GET /v1/products?limit=2 HTTP/1.0\r\n\r\n',
    ];
    const ids: string[] = [];
    for (const request of requests) {
      const answer = parseRaw(await rawExchange(portOf(server), request));
      const what = JSON.stringify(request.split('\r\n').slice(0, 2));
      t.equal(answer.status, 400, `${what}: 400`);
      t.equal(answer.header('content-type'), 'application/problem+json', `${what}: problem+json`);
      const problem = JSON.parse(answer.body);
      t.match(problem, { status: 400, code: 'invalid_parameter', invalid_params: [{ name: 'Host' }] }, `${what}: names Host`);
      t.equal(problem.invalid_params.length, 1);
      t.equal(answer.header('link'), undefined, `${what}: no Link header echoes it`);
      t.equal(problem.requestId, answer.header('x-request-id'), 'the body quotes the request id of the answer');
      ids.push(problem.requestId);
    }
    const [charged] =
      await db.sql`select count(*)::int as rows, coalesce(sum(used), 0)::int as units from paginated_collections.rate_windows`;
    t.same(charged, { rows: 0, units: 0 }, 'the rate limiter charged none of them');

    const refused = await waitFor('a refused line for each', () => logLines(server.output()).filter((line) => line.outcome === 'refused'), {
      until: (lines) => lines.length >= ids.length,
    });
    t.same(
      refused.map((line) => line.reqId),
      ids,
      'one line each, with the request id it was answered with',
    );
    t.match(refused[0], { level: 30, status: 400, code: 'invalid_parameter', reason: 'host' });
    for (const host of ['a@b:c', 'exa%mple', '[::1', 'a"b'])
      t.notMatch(server.output(), host, `nothing of the Host sent (${host}) is logged`);

    // RFC 9112 makes two Host fields a 400: Node kept the first, Bun joins them, Deno refuses them itself.
    const twice = parseRaw(
      await rawExchange(portOf(server), 'GET /v1 HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nConnection: close\r\n\r\n'),
    );
    t.equal(twice.status, 400, 'two Host fields: 400');
    if (runtime !== 'deno') t.match(JSON.parse(twice.body), { invalid_params: [{ name: 'Host' }] }, 'naming Host');

    const health = parseRaw(await rawExchange(portOf(server), 'GET /healthz HTTP/1.0\r\n\r\n'));
    t.equal(health.status, 200, 'a health check without Host is served');
    const good = parseRaw(await rawExchange(portOf(server), 'GET /v1 HTTP/1.1\r\nHost: X.Example:3000\r\nConnection: close\r\n\r\n'));
    t.equal(good.status, 200, 'a good Host in capitals, with a port, is served');
    t.match(good.header('link'), /<http:\/\/x\.example:3000\/v1>; rel="self"/);

    const series = await requestSeries(server);
    t.ok(
      series.some((line) => line.startsWith('http_refused_total{reason="host"}')),
      'counted in http_refused_total',
    );
  });

  t.test(`${runtime}: invented methods and paths add no series to /metrics`, async (t) => {
    const send = async (method: string, path: string) => {
      await rawExchange(portOf(server), `${method} ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    };
    /** Each method on /v1 (a 405), on a collection nobody has (405, or 404 for GET), and a GET of a path nobody serves. */
    const sendAll = async (methods: string[]) => {
      for (const [i, method] of methods.entries()) {
        await send(method, '/v1');
        await send(method, `/v1/nope${i}`);
        await send('GET', `/nope/${method}/${i}`);
      }
    };
    // Once first, for the series the first refusal, unknown method and unknown path add.
    await sendAll(['PROPFIND', 'XWARMUP', 'getwarmup', 'GET']);
    const before = await requestSeries(server);
    // Methods Node's parser knows beyond the usual nine, and tokens only Deno accepts (Node and Bun refuse them).
    const methods = ['MKCOL', 'LOCK', 'UNLOCK', 'PURGE', 'SEARCH', 'REPORT', 'MKCALENDAR', 'LINK', 'SUBSCRIBE', 'COPY'];
    for (let i = 0; i < 20; i++) methods.push(`INVENTED${i}`, `get${i}`);
    await sendAll(methods);
    const after = await requestSeries(server);
    const added = after.filter((line) => !before.some((old) => old.split(' ')[0] === line.split(' ')[0]));
    t.same(added, [], `no new series (${before.length} before)`);
    t.same(
      after.filter((line) => /method="(?!GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS|CONNECT|TRACE|other")/.test(line)),
      [],
      'no method label outside the nine and other',
    );
  });
}
