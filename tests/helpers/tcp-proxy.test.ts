// The fault proxy's reset: a RST when one can be had, and never a socket left open that keeps its process
// from exiting.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { resetSocket } from './tcp-proxy.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs `body` in a new Node process with `resetSocket` and `net` in scope, and resolves with its output and
 * exit code, or with code 'hung' when it has not exited within `timeoutMs` (it is killed then): in the
 * test's own process, a socket left open would keep tap waiting for 300 s.
 */
async function run(body: string, timeoutMs = 10_000): Promise<{ code: number | 'hung'; output: string }> {
  const script = `import net from 'node:net'; import { resetSocket } from './tests/helpers/tcp-proxy.ts';\n${body}`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: root });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return { code: signal === 'SIGKILL' ? 'hung' : (code ?? 1), output };
}

t.test('an open connection is reset: the peer gets ECONNRESET', async (t) => {
  const server = createServer((socket) => setTimeout(() => resetSocket(socket), 50));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
  const [error] = (await once(client, 'error')) as [NodeJS.ErrnoException];
  t.equal(error.code, 'ECONNRESET');
});

t.test('a connection reset while its own shutdown is under way is closed, and its process exits', async (t) => {
  // The peer's FIN makes Node end the socket's write side; in the microtask after that, its shutdown is
  // under way: Node 20's resetAndDestroy() fails there and leaves the socket open forever.
  const { code, output } = await run(`
    const server = net.createServer((socket) => {
      socket.on('error', (error) => console.log('error:', error.code, error.syscall));
      socket.on('end', () => queueMicrotask(() => {
        console.log('shutting down:', socket.writableEnded && !socket.writableFinished);
        resetSocket(socket);
        server.close();
      }));
      socket.on('close', () => console.log('closed'));
    });
    server.listen(0, '127.0.0.1', () => {
      const client = net.connect(server.address().port, '127.0.0.1', () => client.end());
      client.on('error', () => {});
      client.resume();
    });`);
  t.equal(code, 0, 'the process exits on its own');
  t.match(output, /^shutting down: true\nclosed\n$/, 'the window was hit, no error, the socket closed');
});
