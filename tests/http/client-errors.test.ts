// Requests Node's HTTP parser refuses itself are answered with problem+json too, over a real socket, and each
// leaves one log line and a count in /metrics, like every request the app answers.
import { connect } from 'node:net';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import t from 'tap';
import { ADMIN_TOKEN } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';
import { logLines } from '../helpers/logs.ts';
import { documentChecker } from '../helpers/openapi.ts';
import { freePort } from '../helpers/processes.ts';
import { startServer } from '../helpers/servers.ts';
import { waitFor } from '../helpers/wait.ts';

interface Exchange {
  statusLine: string;
  headers: Map<string, string>;
  body: string;
  /** The server closed the connection without the client ending it. */
  closedByServer: boolean;
}

/** Sends bytes no HTTP client would send and reads until the server closes the connection. */
function exchange(port: number, text: string, options: { end?: boolean } = {}): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => (options.end ? socket.end(text) : socket.write(text)));
    let raw = '';
    const timer = setTimeout(() => reject(new Error(`No close within 5 s; got: ${raw.slice(0, 200)}`)), 5000);
    socket.on('data', (chunk) => (raw += chunk.toString('latin1')));
    socket.on('error', (error) => reject(new Error(`${error.message}; got: ${raw.slice(0, 200)}`)));
    socket.on('close', () => {
      clearTimeout(timer);
      const split = raw.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = raw.slice(0, split).split('\r\n');
      const headers = new Map(
        lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      resolve({ statusLine, headers, body: raw.slice(split + 4), closedByServer: !options.end });
    });
  });
}

const db = await testDatabase(t);
const port = await freePort();
const server = await startServer(t, port, { DATABASE_URL: db.url, ADMIN_TOKEN });
/** The request ids the refused requests were answered with, in order. */
const answered: string[] = [];
// A refusal comes before any route: the description lists it as every operation's 4XX (GET /healthz lists no other).
const checker = documentChecker(await (await fetch(`http://127.0.0.1:${port}/openapi.json`)).json());

const refused: { name: string; request: string; status: number; part: string | undefined }[] = [
  { name: 'a control byte in the URL', request: 'GET /v1/pro\x01ducts HTTP/1.1\r\nHost: x\r\n\r\n', status: 400, part: 'url' },
  {
    name: 'a bad Content-Length',
    request: 'POST /v1/keys HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
    status: 400,
    part: 'Content-Length',
  },
  {
    name: 'two Content-Lengths',
    request: 'POST /v1/keys HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
    status: 400,
    part: 'Content-Length',
  },
  {
    name: 'Content-Length with Transfer-Encoding (request smuggling)',
    request: 'POST /v1/keys HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    status: 400,
    part: 'Transfer-Encoding',
  },
  { name: 'a space in a header name', request: 'GET /v1 HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', status: 400, part: 'header' },
  { name: 'a bad method', request: 'G@T /v1 HTTP/1.1\r\nHost: x\r\n\r\n', status: 400, part: 'method' },
  {
    name: 'a bad chunk size',
    // Its headers are sound, so the app may begin it before the body fails: another path than those refused
    // before the app, which must leave no request line.
    request: 'POST /v1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    status: 400,
    part: 'body',
  },
  {
    name: 'over 16 KiB of headers',
    request: `GET /v1 HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    status: 431,
    part: undefined,
  },
];

for (const { name, request, status, part } of refused) {
  t.test(`${name}: ${status} problem+json, then the connection is closed`, async (t) => {
    const res = await exchange(port, request);
    t.match(res.statusLine, new RegExp(`^HTTP/1\\.1 ${status} `));
    t.equal(res.headers.get('content-type'), 'application/problem+json');
    t.equal(Number(res.headers.get('content-length')), Buffer.byteLength(res.body), 'the body is complete');
    t.equal(res.headers.get('connection'), 'close');
    t.ok(res.closedByServer, 'the server closes the connection');
    const problem = JSON.parse(res.body);
    t.equal(problem.requestId, res.headers.get('x-request-id'));
    answered.push(problem.requestId);
    t.equal(problem.status, status);
    t.equal(problem.code, status === 431 ? 'headers_too_large' : 'invalid_parameter');
    const documented = checker.check('GET', '/healthz', { status, headers: new Headers([...res.headers]), body: problem });
    t.same(documented.errors, [], 'as the description says');
    if (part)
      t.same(
        problem.invalid_params.map((p: { name: string }) => p.name),
        [part],
        `names the ${part}`,
      );
    else t.match(problem.detail, /at most 16384 bytes/);
  });
}

t.test('a missing Host header: 400 problem+json naming it, not node:http’s empty 400', async (t) => {
  const res = await exchange(port, 'GET /v1 HTTP/1.1\r\n\r\n', { end: true });
  t.match(res.statusLine, /^HTTP\/1\.1 400 /);
  t.equal(res.headers.get('content-type'), 'application/problem+json');
  answered.push(res.headers.get('x-request-id')!);
  t.same(
    JSON.parse(res.body).invalid_params.map((p: { name: string }) => p.name),
    ['Host'],
  );
});

t.test('each refused request: one log line with the id it was answered with, and counted in /metrics', async (t) => {
  const refused = await waitFor('a refused line for each', () => logLines(server.output()).filter((line) => line.outcome === 'refused'), {
    until: (lines) => lines.length >= answered.length,
  });
  t.same(
    refused.map((line) => line.reqId),
    answered,
    'one line each, in order, with the request id of its answer',
  );
  t.same(
    refused.map((line) => [line.status, line.reason]),
    [
      [400, 'url'],
      [400, 'content_length'],
      [400, 'content_length'],
      [400, 'transfer_encoding'],
      [400, 'header'],
      [400, 'method'],
      [400, 'body'],
      [431, 'headers_too_large'],
      [400, 'host'],
    ],
    'its status, and what was wrong, from a fixed set',
  );
  t.match(refused[0], { level: 30, code: 'invalid_parameter', msg: 'Refused: url' });
  for (const line of refused)
    t.same(Object.keys(line).sort(), ['code', 'hostname', 'level', 'msg', 'outcome', 'pid', 'reason', 'reqId', 'status', 'time']);
  // Nothing of what was sent: neither the request line nor a header.
  for (const sent of ['G@T', 'Bad Header', 'aaaaaaaaaa', 'chunked']) t.notMatch(server.output(), sent, `${sent} is in no line`);
  t.equal(
    logLines(server.output()).filter((line) => line.path === '/v1/keys').length,
    0,
    'and no request line of the app for those refused before it',
  );

  const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const families = new Map(parsePrometheusTextFormat(await res.text()).map((family) => [family.name, family]));
  const count = (name: string, labels: Record<string, string>) =>
    Number(families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value ?? 0);
  t.equal(count('http_refused_total', { reason: 'content_length' }), 2);
  t.equal(count('http_refused_total', { reason: 'headers_too_large' }), 1);
  t.equal(count('http_refused_total', { reason: 'host' }), 1);
  t.equal(count('http_requests_total', { route: 'refused', method: 'other', status: '400' }), 7, 'parser refusals: no method read');
  t.equal(count('http_requests_total', { route: 'refused', method: 'other', status: '431' }), 1);
  t.equal(count('http_requests_total', { route: 'refused', method: 'GET', status: '400' }), 1, 'the missing Host: its method was read');
});

t.test('the server still serves after all of that', async (t) => {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`);
  t.equal(res.status, 200);
});
