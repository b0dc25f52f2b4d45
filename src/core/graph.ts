/**
 * The rollup graph: assets feed rollups (upstream edges) and rollups write
 * output assets (output edges), so rollups chain. Pure: the config refuses what this finds
 * wrong (a cycle, two writers of one asset, a rollup reading its own output), and the graph API
 * and status page lay the nodes out in layers by depth.
 */

/** What the graph needs of a rollup: its id, what it reads and what it writes. */
export interface GraphRollup {
  readonly id: string;
  readonly upstream: readonly string[];
  readonly output?: string | undefined;
}

/** One refusal, naming the rollup (by its index in config order) and the field at fault. */
export interface GraphProblem {
  readonly index: number;
  readonly field: 'output' | 'upstream';
  readonly message: string;
}

/**
 * Every reason to refuse these rollups as a graph: an output that is also the rollup's own
 * upstream, an output two rollups write (whose run would the coverage be?), and one cycle
 * through other rollups' outputs, named from its first rollup in config order.
 */
export function graphProblems(rollups: readonly GraphRollup[]): GraphProblem[] {
  const problems: GraphProblem[] = [];
  const writer = new Map<string, number>();
  rollups.forEach((r, index) => {
    if (r.output === undefined) return;
    if (r.upstream.includes(r.output)) {
      problems.push({
        index,
        field: 'output',
        message: `output ${r.output} is also an upstream of this rollup: it would wait for its own runs (rollup cycle: ${r.id} -> ${r.output} -> ${r.id})`,
      });
    }
    const first = writer.get(r.output);
    if (first !== undefined) {
      problems.push({
        index,
        field: 'output',
        message: `output ${r.output} is already the output of rollup ${rollups[first]!.id}: an asset has at most one writing rollup`,
      });
    } else writer.set(r.output, index);
  });
  const cycle = findCycle(rollups, { selfLoops: false });
  if (cycle !== null) {
    const index = rollups.findIndex((r) => r.id === cycle[0]);
    problems.push({ index, field: 'output', message: `rollup cycle: ${cycle.join(' -> ')}` });
  }
  return problems;
}

/**
 * One cycle of rollups, as the path `a -> agg.a -> b -> agg.b -> a` (rollup, its output, the
 * rollup reading it, ...), starting at the cycle's first rollup in config order; null when the
 * graph is acyclic. `selfLoops: false` ignores rollups that read their own output (reported apart).
 * Iterative depth-first search: a chain of 1,000 rollups must not hit the call stack's limit.
 */
export function findCycle(
  rollups: readonly GraphRollup[],
  options: { readonly selfLoops?: boolean } = {},
): string[] | null {
  const next = successors(rollups, options.selfLoops ?? true);
  const colour = new Array<0 | 1 | 2>(rollups.length).fill(0); // unseen, on the path, done
  for (let root = 0; root < rollups.length; root++) {
    if (colour[root] !== 0) continue;
    const path: number[] = [root];
    const cursor: number[] = [0];
    colour[root] = 1;
    while (path.length > 0) {
      const at = path.at(-1)!;
      const edges = next[at]!;
      const i = cursor.at(-1)!;
      if (i === edges.length) {
        colour[at] = 2;
        path.pop();
        cursor.pop();
        continue;
      }
      cursor[cursor.length - 1] = i + 1;
      const to = edges[i]!;
      if (colour[to] === 1) return cyclePath(rollups, path.slice(path.indexOf(to)));
      if (colour[to] === 0) {
        colour[to] = 1;
        path.push(to);
        cursor.push(0);
      }
    }
  }
  return null;
}

/** Rollup index -> indexes of the rollups that read its output. */
function successors(rollups: readonly GraphRollup[], selfLoops: boolean): number[][] {
  const readers = new Map<string, number[]>();
  rollups.forEach((r, i) => {
    for (const asset of new Set(r.upstream)) {
      const list = readers.get(asset);
      if (list) list.push(i);
      else readers.set(asset, [i]);
    }
  });
  return rollups.map((r, i) =>
    r.output === undefined ? [] : (readers.get(r.output) ?? []).filter((j) => selfLoops || j !== i),
  );
}

function cyclePath(rollups: readonly GraphRollup[], cycle: readonly number[]): string[] {
  const first = cycle.indexOf(Math.min(...cycle));
  const ordered = [...cycle.slice(first), ...cycle.slice(0, first)];
  const names = ordered.flatMap((i) => [rollups[i]!.id, rollups[i]!.output!]);
  return [...names, rollups[ordered[0]!]!.id];
}

export type NodeKind = 'asset' | 'rollup';

export interface GraphNode {
  readonly kind: NodeKind;
  readonly name: string;
  /** Layer from the left: 0 for assets no rollup writes, then one more per edge along the longest path. */
  readonly depth: number;
}

export interface GraphEdge {
  readonly from: { readonly kind: NodeKind; readonly name: string };
  readonly to: { readonly kind: NodeKind; readonly name: string };
  readonly role: 'upstream' | 'output';
}

export interface Graph {
  readonly nodes: readonly GraphNode[];
  readonly edges: readonly GraphEdge[];
}

/**
 * The graph of an acyclic set of rollups (graphProblems empty) and any further assets to show:
 * every node with its depth (a rollup one layer right of its deepest upstream, its output one
 * right of it), so a left-to-right drawing has every edge pointing right. Nodes are ordered by
 * depth, then kind and name; edges by their rollup's order.
 */
export function buildGraph(rollups: readonly GraphRollup[], assets: readonly string[] = []): Graph {
  const writerOf = new Map<string, number>();
  rollups.forEach((r, i) => {
    if (r.output !== undefined) writerOf.set(r.output, i);
  });
  const rollupDepth = rollupDepths(rollups);
  const assetDepth = (name: string): number => {
    const w = writerOf.get(name);
    return w === undefined ? 0 : rollupDepth[w]! + 1;
  };
  const nodes = new Map<string, GraphNode>();
  const add = (kind: NodeKind, name: string, depth: number) => {
    nodes.set(`${kind}:${name}`, { kind, name, depth });
  };
  const edges: GraphEdge[] = [];
  rollups.forEach((r, i) => {
    add('rollup', r.id, rollupDepth[i]!);
    for (const a of new Set(r.upstream)) {
      add('asset', a, assetDepth(a));
      edges.push({ from: { kind: 'asset', name: a }, to: { kind: 'rollup', name: r.id }, role: 'upstream' });
    }
    if (r.output !== undefined) {
      add('asset', r.output, assetDepth(r.output));
      edges.push({
        from: { kind: 'rollup', name: r.id },
        to: { kind: 'asset', name: r.output },
        role: 'output',
      });
    }
  });
  for (const a of assets) if (!nodes.has(`asset:${a}`)) add('asset', a, assetDepth(a));
  const sorted = [...nodes.values()].sort(
    (a, b) =>
      a.depth - b.depth || a.kind.localeCompare(b.kind) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
  return { nodes: sorted, edges };
}

/**
 * Each rollup's layer: one right of its deepest upstream asset (assets no rollup writes are layer
 * 0), in topological order (Kahn): readers are placed after every writer they read. Throws on a
 * cycle, which config refuses before a graph is ever built.
 */
function rollupDepths(rollups: readonly GraphRollup[]): number[] {
  const next = successors(rollups, true);
  const indegree = new Array<number>(rollups.length).fill(0);
  for (const list of next) for (const j of list) indegree[j]!++;
  const depth = new Array<number>(rollups.length).fill(1);
  const ready = indegree.flatMap((d, i) => (d === 0 ? [i] : []));
  let placed = 0;
  while (ready.length > 0) {
    const i = ready.pop()!;
    placed++;
    for (const j of next[i]!) {
      depth[j] = Math.max(depth[j]!, depth[i]! + 2);
      if (--indegree[j]! === 0) ready.push(j);
    }
  }
  if (placed < rollups.length) throw new Error(`rollup cycle: ${findCycle(rollups)?.join(' -> ')}`);
  return depth;
}
