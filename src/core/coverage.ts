/** Projects stored segments onto a query window: the coverage answer. */
import { intersect } from './intervals.js';
import type { Interval, Piece, Segment } from './types.js';

export interface ReplayRequiredPiece extends Interval {
  readonly version: string | null;
  readonly requiredVersion: string;
}

export interface CoverageInput {
  readonly window: Interval;
  /** Segments overlapping the window, in any order. */
  readonly segments: readonly Segment[];
  /** [min start, max end) of all the asset's segments; null when it has none. */
  readonly extent: Interval | null;
  readonly limit: number;
}

export interface Coverage {
  covered: boolean;
  ratio: number;
  /** Measure of the complete pieces. */
  complete: number;
  missing: Interval[];
  replayRequired: ReplayRequiredPiece[];
  knownGaps: Interval[];
  /** The `limit` pieces nearest the window's end, latest first. */
  batches: Piece[];
  versions: string[];
}

interface MutablePiece {
  start: number;
  end: number;
  state: Piece['state'];
  version: string | null;
  requiredVersion: string | null;
}

function gap(start: number, end: number): MutablePiece {
  return { start, end, state: 'gap', version: null, requiredVersion: null };
}

/** Every piece of the window in ascending order, gaps included; they tile the window exactly. */
export function piecesOf(window: Interval, segments: readonly Segment[]): Piece[] {
  const sorted = [...segments].sort((a, b) => a.start - b.start);
  const out: MutablePiece[] = [];
  let cursor = window.start;
  for (const s of sorted) {
    // Clamping to the cursor keeps the tiling sound even if a caller passes overlapping segments.
    const start = Math.max(s.start, cursor);
    const end = Math.min(s.end, window.end);
    if (end <= start) continue;
    if (start > cursor) out.push(gap(cursor, start));
    const prev = out[out.length - 1];
    if (
      prev !== undefined &&
      prev.end === start &&
      prev.state === s.state &&
      prev.version === s.version &&
      prev.requiredVersion === s.requiredVersion
    )
      prev.end = end;
    else out.push({ start, end, state: s.state, version: s.version, requiredVersion: s.requiredVersion });
    cursor = end;
  }
  if (cursor < window.end) out.push(gap(cursor, window.end));
  return out;
}

export function projectCoverage(input: CoverageInput): Coverage {
  const { window, extent } = input;
  const pieces = piecesOf(window, input.segments);
  let complete = 0;
  const missing: Interval[] = [];
  const replayRequired: ReplayRequiredPiece[] = [];
  const versions = new Set<string>();
  for (const p of pieces) {
    if (p.state === 'gap') {
      missing.push({ start: p.start, end: p.end });
      continue;
    }
    if (p.version !== null) versions.add(p.version);
    if (p.state === 'complete') complete += p.end - p.start;
    else {
      // The edge rejects versionless replay requirements (events.ts), so this means a corrupt index.
      if (p.requiredVersion === null)
        throw new Error(`replay_required piece [${p.start}, ${p.end}) has no required version`);
      replayRequired.push({
        start: p.start,
        end: p.end,
        version: p.version,
        requiredVersion: p.requiredVersion,
      });
    }
  }
  const width = window.end - window.start;
  const limit = Math.max(0, Math.floor(input.limit));
  return {
    covered: missing.length === 0 && replayRequired.length === 0,
    ratio: width > 0 ? complete / width : 1,
    complete,
    missing,
    replayRequired,
    knownGaps: extent === null ? [] : intersect(missing, [extent]),
    batches: pieces.slice(Math.max(0, pieces.length - limit)).reverse(),
    versions: [...versions].sort(),
  };
}
