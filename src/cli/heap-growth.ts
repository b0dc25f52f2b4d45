import { setFlagsFromString } from 'node:v8';

/**
 * How far V8 lets the old generation grow past what the last full collection left live, in percent
 * (V8's --heap-growing-percent: the limit is live × (1 + p/100)). V8 picks a factor of up to 4 on
 * its own for a small heap that collects fast. At platform scale (issue 38, docs/benchmarks.md)
 * the daemon holds 40 to 60 MB live and promotes about 2.5 MB/s of short-lived work (run checks,
 * scrapes) that dies in the old generation: with V8's factor it grew to 140-190 MB used before each
 * full collection, RSS to 280-330 MB; at 100 % it stays near 2× live (RSS about 230 MB), for a
 * full collection about once a minute (8 in 3 minutes, 7-26 ms each, incremental).
 */
export const HEAP_GROWING_PERCENT = 100;

/**
 * Sets HEAP_GROWING_PERCENT for the daemon (`start`), unless the operator gave node their own
 * (`node --heap-growing-percent=...`, or in NODE_OPTIONS). V8 reads it each time it sizes the old
 * generation, so setting it before the daemon allocates applies it from the first collection on.
 */
export function boundHeapGrowth(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): boolean {
  const given = [...execArgv, nodeOptions].some((a) => /--heap[-_]growing[-_]percent/.test(a));
  if (given) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
