// `node bench/cpu-profile.ts <file.cpuprofile> [window seconds] [function]`: what a server's CPU went to, window
// by window, from a profile written by `node --cpu-prof`, to see a cost that grows with the load's length (docs/benchmarks.md).
// For each window: the busy time (every sample but idle ones: JavaScript, native code, garbage collection)
// and the share of it spent in one function's own code (default `remove`, postgres.js's Queue.remove),
// plus the five functions with the most of it.
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, windowArg = '2', target = 'remove'] = process.argv.slice(2);
if (!file) {
  console.error('Usage: node bench/cpu-profile.ts <file.cpuprofile> [window seconds] [function name]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const windowMicros = Number(windowArg) * 1e6;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));

/** "name file:line" of a node, the file shortened to what follows node_modules/ or the project root. */
function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(bench|lib|db)\//, '$1/');
  return `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
}

interface Window {
  busy: number;
  target: number;
  self: Map<string, number>;
}

const windows: Window[] = [];
let time = 0;
for (let i = 0; i < profile.samples.length; i++) {
  // A sample's time is the delta that follows it: the time until the next sample.
  const delta = profile.timeDeltas[i + 1] ?? 0;
  time += profile.timeDeltas[i] ?? 0;
  const node = byId.get(profile.samples[i]!)!;
  const name = node.callFrame.functionName;
  if (name === '(idle)') continue;
  const index = Math.floor(time / windowMicros);
  windows[index] ??= { busy: 0, target: 0, self: new Map() };
  const window = windows[index];
  window.busy += delta;
  if (name === target && node.callFrame.url.includes('postgres')) window.target += delta;
  const key = label(node);
  window.self.set(key, (window.self.get(key) ?? 0) + delta);
}

for (const [index, window] of windows.entries()) {
  if (!window) continue;
  const from = (index * windowMicros) / 1e6;
  const share = (micros: number) => `${((100 * micros) / window.busy).toFixed(1)} %`;
  const top = [...window.self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 5);
  console.log(
    `${from.toFixed(0)}–${(from + windowMicros / 1e6).toFixed(0)} s: busy ${(window.busy / 1e6).toFixed(2)} s, ${target} ${share(window.target)}; top: ${top
      .map(([name, micros]) => `${name} ${share(micros)}`)
      .join(', ')}`,
  );
}
