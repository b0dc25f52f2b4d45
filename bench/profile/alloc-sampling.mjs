/**
 * Allocation sampling for a daemon under a benchmark: preloaded into the daemon's process
 * (BENCH_DAEMON_NODE_ARGS="--import ./bench/profile/alloc-sampling.mjs"), it starts V8's sampling
 * heap profiler through an in-process inspector session, keeping the samples of objects the GC
 * has collected too, so a profile is what was allocated, garbage included, not what is live.
 * Every ALLOC_PROFILE_EVERY_MS (default 60 s) it writes the window's profile to
 * ALLOC_PROFILE_DIR/alloc-NNN.heapprofile (the Chrome DevTools format; bench/profile/top.ts sums it)
 * and starts a new window. Nothing here changes what the daemon does.
 * ALLOC_PROFILE_SURVIVORS=1 drops the samples scavenges collected: what is left is what lived long
 * enough to be promoted to the old generation (then collected by a full GC, or still live), the
 * garbage that grows the old generation between full collections, and so RSS.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.ALLOC_PROFILE_DIR ?? 'alloc-profiles';
const every = Number(process.env.ALLOC_PROFILE_EVERY_MS ?? 60_000);
const interval = Number(process.env.ALLOC_PROFILE_INTERVAL ?? 32_768);
mkdirSync(dir, { recursive: true });
const session = new Session();
session.connect();
const post = (method, params = {}) =>
  new Promise((resolve, reject) =>
    session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
  );
const start = () =>
  post('HeapProfiler.startSampling', {
    samplingInterval: interval,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env.ALLOC_PROFILE_SURVIVORS !== '1',
  });
await post('HeapProfiler.enable');
await start();
let window = 0;
let since = Date.now();
setInterval(async () => {
  const { profile } = await post('HeapProfiler.stopSampling');
  await start();
  const now = Date.now();
  writeFileSync(
    join(dir, `alloc-${String(++window).padStart(3, '0')}.heapprofile`),
    JSON.stringify({ ...profile, window: { from: since, to: now, rss: process.memoryUsage().rss } }),
  );
  since = now;
}, every).unref();
