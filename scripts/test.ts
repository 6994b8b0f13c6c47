// `npm test`: runs tap against DATABASE_URL, or against an embedded PostgreSQL when none is set,
// and ends with one plain summary line ("N passed, N failed").
import { spawn } from 'node:child_process';
import { startEmbedded } from '../db/embedded.ts';

const embedded = process.env.DATABASE_URL
  ? undefined
  : await startEmbedded({ dataDir: new URL('../.data/test-postgres', import.meta.url).pathname });
const env = { ...process.env, DATABASE_URL: process.env.DATABASE_URL ?? embedded!.url };
if (embedded) console.log(`DATABASE_URL is not set: testing against an embedded PostgreSQL (${embedded.url})`);

const tap = spawn('npx', ['tap', ...process.argv.slice(2)], { stdio: ['inherit', 'pipe', 'inherit'], env });
let tail = '';
tap.stdout.on('data', (chunk: Buffer) => {
  process.stdout.write(chunk);
  tail = (tail + chunk.toString()).slice(-4096);
});
const code = await new Promise<number>((resolve) => tap.on('close', (status) => resolve(status ?? 1)));
await embedded?.stop();

// tap's closing line is "# { total: 30, pass: 29, fail: 1 }"; restate it plainly for CI.
const summary = /# \{([^}]*)\}\s*$/m.exec(tail.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, ''))?.[1] ?? '';
const count = (key: string) => Number(new RegExp(`${key}: (\\d+)`).exec(summary)?.[1] ?? 0);
console.log(`Tests: ${count('pass')} passed, ${count('fail')} failed`);
process.exit(code !== 0 ? code : count('pass') === 0 ? 1 : 0);
