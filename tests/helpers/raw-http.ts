// Raw HTTP over a socket, for requests no client library would send (HTTP/1.0 without Host, a malformed line).
import { connect } from 'node:net';

/**
 * Sends `text` to `port` on 127.0.0.1 and resolves with everything the server wrote until it closed (an
 * HTTP/1.0 answer closes the connection). The socket is not half-closed: node:http drops the answer of a
 * request whose client ended its side before it, and a balancer's check does not end it either.
 */
export function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error('No answer within 10 s')));
  });
}

/** The status code and the lower-cased header named `name` of a raw HTTP answer. */
export function parseRaw(answer: string): { status: number; header(name: string): string | undefined; body: string } {
  const [head = '', body = ''] = answer.split('\r\n\r\n', 2);
  const [statusLine = '', ...lines] = head.split('\r\n');
  return {
    status: Number(statusLine.split(' ')[1]),
    header: (name) =>
      lines
        .find((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))
        ?.slice(name.length + 1)
        .trim(),
    body,
  };
}
