/**
 * Where the graph page draws each node: one column per depth, left to right, so every edge points
 * right; within a column, nodes ordered by the mean position of their neighbours (barycentre
 * sweeps, the usual layered-drawing heuristic) and placed level with them where room allows, so a
 * chain reads as a straight line and crossings stay few. Pure, and linear in nodes and edges per sweep.
 */

export interface LayoutInput {
  readonly nodes: ReadonlyArray<{ readonly id: string; readonly depth: number }>;
  readonly edges: ReadonlyArray<{ readonly from: string; readonly to: string }>;
}

export interface Placed {
  readonly x: number;
  readonly y: number;
}

export interface Layout {
  readonly at: ReadonlyMap<string, Placed>;
  readonly width: number;
  readonly height: number;
}

export const NODE_WIDTH = 200;
export const NODE_HEIGHT = 34;
const GAP_X = 70;
const GAP_Y = 8;
const ROW = NODE_HEIGHT + GAP_Y;
const SWEEPS = 2;

export function layoutGraph({ nodes, edges }: LayoutInput): Layout {
  const depths = [...new Set(nodes.map((n) => n.depth))].sort((a, b) => a - b);
  const column = new Map(depths.map((d, i) => [d, i]));
  const columns: string[][] = depths.map(() => []);
  for (const n of nodes) columns[column.get(n.depth)!]!.push(n.id);
  const into = neighbours(edges, (e) => [e.to, e.from]);
  const outOf = neighbours(edges, (e) => [e.from, e.to]);

  const index = new Map<string, number>();
  const reindex = (col: readonly string[]) => col.forEach((id, i) => void index.set(id, i));
  columns.forEach(reindex);
  // Sort a column by its neighbours' mean index; nodes without any keep their place.
  const sortBy = (col: string[], near: Map<string, string[]>) => {
    const key = new Map(
      col.map((id, i) => {
        const ns = (near.get(id) ?? []).filter((n) => index.has(n));
        return [id, ns.length === 0 ? i : ns.reduce((s, n) => s + index.get(n)!, 0) / ns.length];
      }),
    );
    col.sort((a, b) => key.get(a)! - key.get(b)!);
    reindex(col);
  };
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    for (let c = 1; c < columns.length; c++) sortBy(columns[c]!, into);
    for (let c = columns.length - 2; c >= 0; c--) sortBy(columns[c]!, outOf);
  }

  // Top to bottom in each column, level with the mean of the upstream neighbours when free.
  const at = new Map<string, Placed>();
  let height = 0;
  columns.forEach((col, c) => {
    let next = 0;
    for (const id of col) {
      const ys = (into.get(id) ?? []).flatMap((n) => (at.has(n) ? [at.get(n)!.y] : []));
      const want = ys.length === 0 ? 0 : ys.reduce((s, y) => s + y, 0) / ys.length;
      const y = Math.max(next, Math.round(want));
      at.set(id, { x: c * (NODE_WIDTH + GAP_X), y });
      next = y + ROW;
      height = Math.max(height, y + NODE_HEIGHT);
    }
  });
  const width = columns.length === 0 ? 0 : columns.length * (NODE_WIDTH + GAP_X) - GAP_X;
  return { at, width, height };
}

function neighbours<E>(edges: readonly E[], ends: (e: E) => [string, string]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const e of edges) {
    const [key, other] = ends(e);
    const list = out.get(key);
    if (list) list.push(other);
    else out.set(key, [other]);
  }
  return out;
}
