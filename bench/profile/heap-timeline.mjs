/**
 * A heap timeline for a daemon under a benchmark, preloaded into its process
 * (BENCH_DAEMON_NODE_ARGS="--import ./bench/profile/heap-timeline.mjs"): every
 * HEAP_TIMELINE_EVERY_MS (250) one JSON line in HEAP_TIMELINE_FILE with the seconds since start,
 * RSS, V8's heap (used, total, old and new space used) and the garbage collections since the last
 * line (kind and milliseconds). It reads counters only: unlike the allocation sampler, it leaves
 * V8's allocation and collection as they are.
 */
import { appendFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';

const file = process.env.HEAP_TIMELINE_FILE ?? 'heap-timeline.jsonl';
const every = Number(process.env.HEAP_TIMELINE_EVERY_MS ?? 250);
const KINDS = {
  1: 'scavenge',
  2: 'mark-compact',
  4: 'incremental',
  8: 'weak-callbacks',
  16: 'minor-mark-sweep',
};
let gcs = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    gcs.push(`${KINDS[e.detail?.kind ?? e.kind] ?? e.detail?.kind}:${e.duration.toFixed(1)}`);
}).observe({ entryTypes: ['gc'] });
const t0 = performance.now();
const mb = (b) => Math.round(b / 1e5) / 10;
setInterval(() => {
  const m = process.memoryUsage();
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]));
  appendFileSync(
    file,
    `${JSON.stringify({
      s: Math.round(performance.now() - t0) / 1000,
      rss: mb(m.rss),
      used: mb(m.heapUsed),
      total: mb(m.heapTotal),
      old: mb(spaces.old_space ?? 0),
      new: mb(spaces.new_space ?? 0),
      large: mb(spaces.large_object_space ?? 0),
      external: mb(m.external),
      gc: gcs,
    })}\n`,
  );
  gcs = [];
}, every).unref();
