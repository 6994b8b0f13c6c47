// Preloaded into a bench server (`node --import`) when the bench measures allocations: SIGUSR2 starts and stops
// V8's sampling heap profiler, and the bytes allocated in between are written to BENCH_ALLOC_FILE.
import { renameSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

/** What the probe writes: `sampling` once the window has started, `done` with its bytes once it has ended. */
export type AllocReport = { state: 'sampling' } | { state: 'done'; bytes: number } | { state: 'failed'; error: string };

/**
 * Bytes between samples: V8 samples one allocation in about this many bytes and scales each sample by its
 * odds of being picked, so that the total estimates every byte allocated; at 4 KB a request allocating tens
 * of kilobytes is sampled several times, and a window of thousands of requests estimates its mean closely.
 */
const SAMPLING_INTERVAL = 4096;

interface ProfileNode {
  selfSize: number;
  children: ProfileNode[];
}

const file = process.env.BENCH_ALLOC_FILE;

/** Written whole (a temporary file renamed over it), so that the bench never reads half of it. */
function report(value: AllocReport): void {
  writeFileSync(`${file}.tmp`, JSON.stringify(value));
  renameSync(`${file}.tmp`, file!);
}

function total(node: ProfileNode): number {
  let bytes = node.selfSize;
  for (const child of node.children) bytes += total(child);
  return bytes;
}

// No session is connected outside a window, so the rows' CPU windows run the server as it runs without the probe.
let session: Session | undefined;

async function toggle(): Promise<void> {
  if (session === undefined) {
    session = new Session();
    session.connect();
    await session.post('HeapProfiler.enable');
    // Objects the GC has already collected stay in the profile: the total is what was allocated, not what is left.
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: SAMPLING_INTERVAL,
      includeObjectsCollectedByMajorGC: false,
      includeObjectsCollectedByMinorGC: false,
    });
    report({ state: 'sampling' });
  } else {
    const ending = session;
    session = undefined;
    try {
      const { profile } = await ending.post('HeapProfiler.stopSampling');
      // Kept whole on request, to read where the bytes go (a .heapprofile opens in Chrome's DevTools).
      if (process.env.BENCH_ALLOC_PROFILE)
        writeFileSync(`${process.env.BENCH_ALLOC_PROFILE}.${process.pid}.heapprofile`, JSON.stringify(profile));
      report({ state: 'done', bytes: total(profile.head as ProfileNode) });
    } finally {
      ending.disconnect();
    }
  }
}

if (file) {
  process.on('SIGUSR2', () => {
    toggle().catch((error: Error) => report({ state: 'failed', error: error.message }));
  });
}
