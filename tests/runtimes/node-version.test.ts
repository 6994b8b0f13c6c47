// The runtime: Node.js 24 runs the TypeScript natively, npm's scripts find the Node that `npm install` brings
// before the machine's own, and an older Node stops with one line (scripts/supported-node.cjs).
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { NODE_FLAGS } from '../helpers/servers.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const packageJson = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'));
const check = path.join(root, 'scripts/supported-node.cjs');

/** Runs the check on this Node with `version` as process.version (preloaded before the check reads it). */
function checkAs(version: string) {
  const fake = `Object.defineProperty(process, 'version', { value: 'v${version}' });
    Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '${version}' } });`;
  return spawnSync(process.execPath, ['-e', `${fake} require(${JSON.stringify(check)})`], { encoding: 'utf8', cwd: root });
}

t.test('engines names Node.js 24, the node package brings a 24, and this suite runs on it', async (t) => {
  t.equal(packageJson.engines.node, '>=24', 'engines says what is supported');
  t.match(packageJson.devDependencies.node, /^24\.\d+\.\d+$/, 'the Node.js that npm install brings is a 24, pinned');
  t.equal(process.versions.node, packageJson.devDependencies.node, 'the tests run on the Node.js the project brings');
  t.notOk('tsx' in { ...packageJson.dependencies, ...packageJson.devDependencies }, 'no transpiler: Node strips the types itself');
});

t.test('start, test, bench and seed check the Node first; start runs node server.ts, flagged', async (t) => {
  for (const script of ['start', 'test', 'bench', 'seed']) {
    t.equal(packageJson.scripts[`pre${script}`], 'node scripts/supported-node.cjs', `pre${script} checks the Node`);
  }
  t.equal(packageJson.scripts.start, `exec node ${NODE_FLAGS.join(' ')} server.ts`, 'npm start is node server.ts, no loader');
});

t.test('the check passes on Node 24 and later, silently', async (t) => {
  for (const version of [process.versions.node, '24.0.0', '26.12.0']) {
    const run = checkAs(version);
    t.equal(run.status, 0, `${version} passes`);
    t.equal(run.stdout + run.stderr, '', `${version}: nothing printed`);
  }
});

t.test('an older Node stops with one line that names it and says what to do', async (t) => {
  for (const version of ['20.20.2', '22.18.0', '23.11.1']) {
    const run = checkAs(version);
    t.equal(run.status, 1, `${version} stops`);
    t.equal(run.stdout, '', 'nothing on stdout');
    const lines = run.stderr.trimEnd().split('\n');
    t.equal(lines.length, 1, `one line, no stack trace: ${run.stderr}`);
    t.match(lines[0], `needs Node.js >=24, and this is v${version}`);
    t.match(lines[0], /npm install/);
  }
});

t.test("npm's scripts run the project's Node even where the machine's PATH has another one first", async (t) => {
  // The PATH a newcomer's shell has: the machine's npm and Node, none of this checkout's node_modules/.bin.
  const machinePath = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => !dir.includes('node_modules'))
    .join(path.delimiter);
  const npm = spawnSync('npm', ['exec', '--', 'node', '-p', 'process.version'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, PATH: machinePath, NODE_OPTIONS: '' },
  });
  t.equal(npm.status, 0, `npm exec runs:\n${npm.stderr}`);
  t.equal(npm.stdout.trim(), `v${packageJson.devDependencies.node}`, 'the Node.js of node_modules/.bin, not the machine’s');
});
