import type { Change, Piece } from '../../src/core/types.js';

/** A point's state and attribution, as docs/concepts.md defines it. */
export type PointState = Omit<Piece, 'start' | 'end'>;

/**
 * The brute-force model the core is tested against: the coverage-state rule evaluated at one point over the whole
 * history in ingest order. The newest completion covering p gives its version; the newest replay
 * requirement covering p makes it replay_required when newer than that completion and at another
 * version.
 */
export function modelAt(history: readonly Change[], p: number): PointState {
  let c = -1;
  let r = -1;
  history.forEach((x, i) => {
    if (x.start <= p && p < x.end) {
      if (x.kind === 'completion') c = i;
      else r = i;
    }
  });
  if (c < 0) return { state: 'gap', version: null, requiredVersion: null };
  const version = history[c]!.version;
  if (r > c && history[r]!.version !== version) {
    return { state: 'replay_required', version, requiredVersion: history[r]!.version };
  }
  return { state: 'complete', version, requiredVersion: null };
}
