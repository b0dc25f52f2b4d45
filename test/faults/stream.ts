import { type EventJob, prng } from './lib.js';

/**
 * The event streams of the fault and scale suites: many assets (integer offsets and 1-minute time
 * slices), sent roughly in order with local disorder, permanent holes, late fills (withheld slices
 * sent at the tail), duplicates (the same id re-sent later) and, optionally, reprocessed spans (a
 * replay requirement, then wider completions at v2 over slices already sent at v1).
 */

export interface StreamSpec {
  readonly seed: number;
  readonly intAssets: number;
  /** Slices per integer asset, each `intWidth` wide, from 0. */
  readonly intSlices: number;
  readonly intWidth: number;
  readonly timeAssets: number;
  /** One-minute slices per time asset, from `timeStartMs`. */
  readonly timeSlices: number;
  readonly timeStartMs: number;
  /** Slices never sent, per asset. */
  readonly holesPerAsset: number;
  /** Share of slices withheld and sent in the last 8 % of the stream. */
  readonly lateFillRate: number;
  /** Share of slices sent twice (same id, later). */
  readonly duplicateRate: number;
  readonly reprocess: boolean;
}

export interface Reprocess {
  readonly asset: string;
  readonly requirement: { readonly start: number | string; readonly end: number | string };
  readonly completions: number;
}

export interface Stream {
  readonly jobs: EventJob[];
  readonly intAssets: string[];
  readonly timeAssets: string[];
  readonly holes: number;
  readonly lateFills: number;
  readonly duplicates: number;
  readonly reprocessed: Reprocess[];
  /** Distinct (asset, id) pairs in the stream. */
  readonly uniqueIds: number;
}

const MINUTE = 60_000;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const pad = (n: number, width = 2) => String(n).padStart(width, '0');

export const intAsset = (i: number) => `int.${pad(i)}`;
export const timeAsset = (i: number) => `time.${i}`;

export function buildStream(spec: StreamSpec): Stream {
  const random = prng(spec.seed);
  const keyed: Array<{ key: number; data: Record<string, unknown> }> = [];
  let holes = 0;
  let lateFills = 0;
  let duplicates = 0;
  const intAssets = Array.from({ length: spec.intAssets }, (_, i) => intAsset(i));
  const timeAssets = Array.from({ length: spec.timeAssets }, (_, i) => timeAsset(i));

  const emitSlices = (
    asset: string,
    slices: number,
    bounds: (k: number) => [number | string, number | string],
  ) => {
    const holeSet = new Set<number>();
    // Holes away from the first and last slice, so an asset's extent is its whole range.
    while (holeSet.size < Math.min(spec.holesPerAsset, slices - 2))
      holeSet.add(1 + Math.floor(random() * (slices - 2)));
    holes += holeSet.size;
    for (let k = 0; k < slices; k++) {
      if (holeSet.has(k)) continue;
      const [start, end] = bounds(k);
      const data = { asset, start, end, version: 'v1', id: `${asset}/${k}` };
      const late = random() < spec.lateFillRate;
      if (late) lateFills++;
      // In order per asset, assets interleaved, neighbours swapped now and then.
      const key = late ? 0.92 + random() * 0.08 : (k / slices) * 0.9 + random() * 0.0005;
      keyed.push({ key, data });
      if (random() < spec.duplicateRate) {
        duplicates++;
        keyed.push({ key: Math.min(0.999, key + random() * 0.02), data: { ...data } });
      }
    }
  };

  for (const asset of intAssets)
    emitSlices(asset, spec.intSlices, (k) => [k * spec.intWidth, (k + 1) * spec.intWidth]);
  for (const asset of timeAssets)
    emitSlices(asset, spec.timeSlices, (k) => [
      iso(spec.timeStartMs + k * MINUTE),
      iso(spec.timeStartMs + (k + 1) * MINUTE),
    ]);

  const reprocessed: Reprocess[] = [];
  if (spec.reprocess) {
    // A requirement, then completions at v2, each as wide as several v1 slices.
    const span = (asset: string, pieces: Array<[number | string, number | string]>) => {
      const first = pieces[0]!;
      const last = pieces.at(-1)!;
      keyed.push({
        key: 0.8,
        data: {
          type: 'replay_requirement',
          asset,
          start: first[0],
          end: last[1],
          version: 'v2',
          id: `${asset}/replay/${first[0]}`,
        },
      });
      for (const [i, [start, end]] of pieces.entries()) {
        keyed.push({
          key: 0.83 + i * 0.001,
          data: { asset, start, end, version: 'v2', id: `${asset}/v2/${start}` },
        });
      }
      reprocessed.push({ asset, requirement: { start: first[0], end: last[1] }, completions: pieces.length });
    };
    const intPieces = (from: number, n: number, width: number) =>
      Array.from({ length: n }, (_, i): [number, number] => [from + i * width, from + (i + 1) * width]);
    if (intAssets.length > 4) {
      span(intAssets[0]!, intPieces(20_000, 3, 10_000));
      span(intAssets[4]!, intPieces(100_000, 2, 10_000));
    }
    if (timeAssets.length > 3) {
      const hour = 60 * MINUTE;
      const at = spec.timeStartMs + 34 * hour; // day 2, 10:00 UTC
      span(timeAssets[0]!, [
        [iso(at), iso(at + hour)],
        [iso(at + hour), iso(at + 2 * hour)],
      ]);
      span(timeAssets[3]!, [[iso(at), iso(at + 6 * hour)]]);
    }
  }

  keyed.sort((a, b) => a.key - b.key);
  const jobs = keyed.map(({ data }, n) => ({ jobId: `j${n}`, data }));
  const ids = new Set(jobs.map((j) => `${j.data.asset}\u0000${j.data.id}`));
  return { jobs, intAssets, timeAssets, holes, lateFills, duplicates, reprocessed, uniqueIds: ids.size };
}
