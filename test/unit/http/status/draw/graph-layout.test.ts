import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildGraph, findCycle, type GraphRollup } from '../../../../../src/core/rollups/graph.js';
import { layoutGraph, NODE_HEIGHT } from '../../../../../src/http/status/draw/graph-layout.js';
import { renderGraph } from '../../../../../src/http/status/draw/graph-page.js';

const asInput = (rollups: readonly GraphRollup[]) => {
  const g = buildGraph(rollups);
  return {
    nodes: g.nodes.map((n) => ({ id: `${n.kind}:${n.name}`, depth: n.depth })),
    edges: g.edges.map((e) => ({ from: `${e.from.kind}:${e.from.name}`, to: `${e.to.kind}:${e.to.name}` })),
  };
};

const acyclic = fc
  .array(
    fc.record({
      upstream: fc.uniqueArray(fc.integer({ min: 0, max: 8 }), { minLength: 1, maxLength: 3 }),
      output: fc.integer({ min: 0, max: 8 }),
    }),
    { maxLength: 12 },
  )
  .map((rs) => {
    const written = new Set<number>();
    return rs.map((r, i): GraphRollup => {
      const output = written.has(r.output) ? undefined : `a${r.output}`;
      written.add(r.output);
      return { id: `r${i}`, upstream: r.upstream.map((a) => `a${a}`), output };
    });
  })
  .filter((rs) => findCycle(rs) === null);

describe('the graph layout', () => {
  it('places every node, none overlapping, every edge pointing right, all inside the drawing', () => {
    fc.assert(
      fc.property(acyclic, (rollups) => {
        const input = asInput(rollups);
        const { at, width, height } = layoutGraph(input);
        expect(at.size).toBe(input.nodes.length);
        const byX = new Map<number, number[]>();
        for (const p of at.values()) byX.set(p.x, [...(byX.get(p.x) ?? []), p.y]);
        for (const ys of byX.values()) {
          ys.sort((a, b) => a - b);
          for (let i = 1; i < ys.length; i++) expect(ys[i]! - ys[i - 1]!).toBeGreaterThanOrEqual(NODE_HEIGHT);
        }
        for (const e of input.edges) expect(at.get(e.to)!.x).toBeGreaterThan(at.get(e.from)!.x);
        for (const p of at.values()) {
          expect(p.x).toBeLessThan(width);
          expect(p.y + NODE_HEIGHT).toBeLessThanOrEqual(height);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('draws a chain as a straight line', () => {
    const { at } = layoutGraph(
      asInput([
        { id: 'hourly', upstream: ['raw'], output: 'agg.hourly' },
        { id: 'daily', upstream: ['agg.hourly'], output: 'agg.daily' },
        { id: 'other', upstream: ['raw2'], output: 'agg.other' },
      ]),
    );
    expect(
      new Set(['asset:raw', 'rollup:hourly', 'asset:agg.hourly', 'rollup:daily'].map((id) => at.get(id)!.y))
        .size,
    ).toBe(1);
  });

  it('renders 200 nodes as one SVG, escaping names, each node linking to its card', () => {
    const rollups = Array.from({ length: 50 }, (_, i) => [
      { id: `h${i}`, upstream: [`raw<${i}>`], output: `agg.h${i}` },
      { id: `d${i}`, upstream: [`agg.h${i}`], output: `agg.d${i}` },
    ]).flat();
    const g = buildGraph(rollups);
    expect(g.nodes).toHaveLength(250);
    const graph = {
      nodes: g.nodes.map((n) =>
        n.kind === 'rollup'
          ? {
              id: `rollup:${n.name}`,
              kind: 'rollup' as const,
              name: n.name,
              depth: n.depth,
              state: 'rerun_pending' as const,
              failed_runs: 0,
              waiting: 2,
              rerun_pending: 1,
              triggered: 3,
              missed: 0,
            }
          : {
              id: `asset:${n.name}`,
              kind: 'asset' as const,
              name: n.name,
              depth: n.depth,
              state: 'unknown' as const,
              written_by: null,
              freshness: null,
            },
      ),
      edges: g.edges.map((e) => ({
        from: `${e.from.kind}:${e.from.name}`,
        to: `${e.to.kind}:${e.to.name}`,
        role: e.role,
      })),
    };
    const svg = renderGraph(graph).value;
    expect(svg.match(/<a href=/g)).toHaveLength(250);
    expect(svg.match(/<path class="edge/g)).toHaveLength(200);
    expect(svg).toContain('raw&lt;7&gt;');
    expect(svg).not.toContain('raw<7>');
    expect(svg).toContain('href="/?rollup=h7"');
    expect(svg).toContain('1 rerun pending · 2 waiting · 3 triggered');
  });
});
