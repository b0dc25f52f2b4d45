/**
 * Turns pieces of a window (coverage pieces, rollup periods) into at most about two drawn items
 * per pixel column, whatever their number. Pieces at least a pixel wide are drawn alone; runs of
 * narrower pieces are gathered into items of about a pixel. A gathered item has two states: the
 * most severe among its pieces (`state`, so a one-minute gap in a year stays visible) and the one
 * that holds most of it (`major`, so a year that is 99.9 % complete still reads as complete).
 * Neighbouring gathered items with the same pair of states merge.
 */
import type { Interval } from '../../../core/types.js';

export interface DrawPiece<D> extends Interval {
  readonly state: string;
  /** How many underlying pieces this one stands for (default 1). */
  readonly count?: number;
  /** Weight of each state in this piece, for `major` (default: its length, all in `state`). */
  readonly weights?: Readonly<Record<string, number>>;
  /** Facts about a single piece, kept for its tooltip while it is drawn alone. */
  readonly detail?: D;
}

export interface DrawItem<D> {
  /** Left edge and width in pixels of the plot. */
  x: number;
  width: number;
  /** The most severe state drawn here. */
  state: string;
  /** The state with the most weight here; equal to `state` for a piece drawn alone. */
  major: string;
  /** Weight per state (lengths, or period counts). */
  weights: Record<string, number>;
  /** The span of the pieces drawn by this item, clipped to the window. */
  start: number;
  end: number;
  count: number;
  /** Present when the item draws exactly one piece. */
  detail: D | undefined;
}

/** Touching, in pixels: pieces closer than this are one run. */
const EPSILON = 1e-6;

function heaviest(weights: Record<string, number>): string {
  let best = '';
  let most = Number.NEGATIVE_INFINITY;
  for (const [state, weight] of Object.entries(weights)) {
    if (weight > most) [best, most] = [state, weight];
  }
  return best;
}

function addWeights(into: Record<string, number>, from: Readonly<Record<string, number>>): void {
  for (const [state, weight] of Object.entries(from)) into[state] = (into[state] ?? 0) + weight;
}

/**
 * `pieces` ascending by start and not overlapping; `severity` orders states (higher wins). The
 * result is ordered for painting: less severe first, so severe items stay on top.
 */
export function toDrawItems<D>(
  pieces: Iterable<DrawPiece<D>>,
  window: Interval,
  plotWidth: number,
  severity: (state: string) => number,
): DrawItem<D>[] {
  const scale = plotWidth / (window.end - window.start);
  const items: DrawItem<D>[] = [];
  let cluster: DrawItem<D> | undefined;

  const push = (item: DrawItem<D>) => {
    const last = items[items.length - 1];
    const alone = last?.detail !== undefined || item.detail !== undefined;
    if (
      last === undefined ||
      alone ||
      last.state !== item.state ||
      last.major !== item.major ||
      item.x > last.x + last.width + EPSILON
    ) {
      items.push(item);
      return;
    }
    last.width = Math.max(last.x + last.width, item.x + item.width) - last.x;
    last.end = Math.max(last.end, item.end);
    last.count += item.count;
    addWeights(last.weights, item.weights);
  };
  const flush = () => {
    if (cluster === undefined) return;
    if (cluster.width < 1) {
      // Widen to a pixel around its centre, inside the plot.
      const x = Math.min(Math.max(cluster.x + cluster.width / 2 - 0.5, 0), Math.max(plotWidth - 1, 0));
      cluster.x = x;
      cluster.width = Math.min(1, plotWidth);
    }
    cluster.major = heaviest(cluster.weights);
    if (cluster.count > 1) cluster.detail = undefined;
    push(cluster);
    cluster = undefined;
  };

  for (const piece of pieces) {
    const start = Math.max(piece.start, window.start);
    const end = Math.min(piece.end, window.end);
    if (end <= start) continue;
    const x0 = (start - window.start) * scale;
    const x1 = (end - window.start) * scale;
    const count = piece.count ?? 1;
    if (x1 - x0 >= 1 || (cluster !== undefined && x0 - (cluster.x + cluster.width) >= 1)) flush();
    if (cluster === undefined) {
      cluster = {
        x: x0,
        width: x1 - x0,
        state: piece.state,
        major: piece.state,
        weights: {},
        start,
        end,
        count,
        detail: piece.detail,
      };
    } else {
      if (severity(piece.state) > severity(cluster.state)) cluster.state = piece.state;
      cluster.width = x1 - cluster.x;
      cluster.end = end;
      cluster.count += count;
    }
    // Weights are summed in place: a year of minute pieces allocates per item, not per piece.
    const weights = cluster.weights;
    if (piece.weights === undefined) weights[piece.state] = (weights[piece.state] ?? 0) + (end - start);
    else for (const state in piece.weights) weights[state] = (weights[state] ?? 0) + piece.weights[state]!;
    if (cluster.width >= 1) flush();
  }
  flush();
  return items
    .map((item, index) => ({ item, index }))
    .sort((a, b) => severity(a.item.state) - severity(b.item.state) || a.index - b.index)
    .map(({ item }) => item);
}
