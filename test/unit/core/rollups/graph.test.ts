import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../../../src/config/index.js';
import { defineRollups } from '../../../../src/config/rollups.js';
import {
  buildGraph,
  findCycle,
  type GraphRollup,
  graphProblems,
} from '../../../../src/core/rollups/graph.js';

/** Brute-force model: rollup i reaches j when a path of "i's output is an upstream of k" edges leads there. */
function reach(rollups: readonly GraphRollup[]): boolean[][] {
  const n = rollups.length;
  const r = rollups.map((a) => rollups.map((b) => a.output !== undefined && b.upstream.includes(a.output)));
  for (let k = 0; k < n; k++)
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) if (r[i]![k] && r[k]![j]) r[i]![j] = true;
  return r;
}

/** Small graphs over few asset names, so chains, diamonds and cycles are all common. */
const graphs = fc
  .array(
    fc.record({
      upstream: fc.uniqueArray(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 3 }),
      output: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
    }),
    { maxLength: 7 },
  )
  .map((rs) =>
    rs.map(
      (r, i): GraphRollup => ({
        id: `r${i}`,
        upstream: r.upstream.map((a) => `a${a}`),
        output: r.output === undefined ? undefined : `a${r.output}`,
      }),
    ),
  );

describe('the rollup graph', () => {
  it('finds a cycle exactly when some rollup reaches itself, and the cycle it names is real', () => {
    fc.assert(
      fc.property(graphs, (rollups) => {
        const r = reach(rollups);
        const cyclic = rollups.some((_, i) => r[i]![i]);
        const cycle = findCycle(rollups);
        expect(cycle !== null).toBe(cyclic);
        if (cycle === null) return;
        expect(cycle[0]).toBe(cycle.at(-1));
        const byId = new Map(rollups.map((x) => [x.id, x]));
        for (let i = 0; i + 2 < cycle.length; i += 2) {
          const from = byId.get(cycle[i]!)!;
          expect(from.output).toBe(cycle[i + 1]);
          expect(byId.get(cycle[i + 2]!)!.upstream).toContain(cycle[i + 1]);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('gives every acyclic graph layers in which each edge points right', () => {
    fc.assert(
      fc.property(graphs, (rollups) => {
        // One writer per asset, as config demands.
        const seen = new Set<string>();
        const unique = rollups.map((x) => {
          if (x.output === undefined || seen.has(x.output)) return { ...x, output: undefined };
          seen.add(x.output);
          return x;
        });
        fc.pre(findCycle(unique) === null);
        const graph = buildGraph(unique, ['extra']);
        const depth = new Map(graph.nodes.map((n) => [`${n.kind}:${n.name}`, n.depth]));
        for (const e of graph.edges)
          expect(depth.get(`${e.to.kind}:${e.to.name}`)!).toBeGreaterThan(
            depth.get(`${e.from.kind}:${e.from.name}`)!,
          );
        // Assets no rollup writes are sources, at layer 0.
        for (const n of graph.nodes)
          if (n.kind === 'asset' && !unique.some((x) => x.output === n.name)) expect(n.depth).toBe(0);
        expect(depth.get('asset:extra')).toBe(0);
      }),
      { numRuns: 1000 },
    );
  });

  it('names a cycle from its first rollup in config order', () => {
    const rollups = [
      { id: 'b', upstream: ['agg.a'], output: 'agg.b' },
      { id: 'raw_reader', upstream: ['raw'], output: 'agg.raw' },
      { id: 'a', upstream: ['agg.b', 'raw'], output: 'agg.a' },
    ];
    expect(findCycle(rollups)).toEqual(['b', 'agg.b', 'a', 'agg.a', 'b']);
    expect(graphProblems(rollups)).toEqual([
      { index: 0, field: 'output', message: 'rollup cycle: b -> agg.b -> a -> agg.a -> b' },
    ]);
  });

  it('lays a chain out left to right, one layer per edge', () => {
    const graph = buildGraph([
      { id: 'daily', upstream: ['agg.hourly'], output: 'agg.daily' },
      { id: 'hourly', upstream: ['raw'], output: 'agg.hourly' },
    ]);
    expect(graph.nodes.map((n) => [n.name, n.depth])).toEqual([
      ['raw', 0],
      ['hourly', 1],
      ['agg.hourly', 2],
      ['daily', 3],
      ['agg.daily', 4],
    ]);
  });

  it('lays out a chain of 1,000 rollups without exhausting the stack', () => {
    const rollups = Array.from({ length: 1000 }, (_, i) => ({
      id: `r${i}`,
      upstream: [`a${i}`],
      output: `a${i + 1}`,
    }));
    expect(findCycle(rollups)).toBeNull();
    expect(buildGraph(rollups).nodes.at(-1)).toEqual({ kind: 'asset', name: 'a1000', depth: 2000 });
    expect(findCycle([...rollups, { id: 'back', upstream: ['a1000'], output: 'a0' }])?.length).toBe(2003);
  });
});

describe('config refuses a rollup graph that cannot run', () => {
  const rollup = (id: string, upstream: string[], output?: string) => ({
    id,
    upstream,
    every: 'hour',
    begin: '2026-01-01T00:00:00Z',
    target: { type: 'queue', queue: 'runs' },
    ...(output === undefined ? {} : { output }),
  });

  it.each([
    [
      [rollup('a', ['agg.b'], 'agg.a'), rollup('b', ['agg.a'], 'agg.b')],
      'rollups[a].output: rollup cycle: a -> agg.a -> b -> agg.b -> a',
    ],
    [
      [rollup('a', ['raw', 'agg.a'], 'agg.a')],
      'rollups[a].output: output agg.a is also an upstream of this rollup',
    ],
    [
      [rollup('a', ['raw'], 'agg'), rollup('b', ['raw'], 'agg')],
      'rollups[b].output: output agg is already the output of rollup a',
    ],
  ])('%#: refused, naming what is wrong', (rollups, message) => {
    expect(() => parseConfig({ rollups })).toThrow(ConfigError);
    expect(() => parseConfig({ rollups })).toThrow(message);
  });

  it('accepts the chain example: raw -> hourly -> daily -> monthly, one layer per edge', () => {
    const rollups = defineRollups(loadConfig({ path: 'config/chain.yaml', env: {} }));
    expect(rollups.map((r) => [r.rollup.id, r.rollup.output])).toEqual([
      ['events_hourly', 'agg.events_hourly'],
      ['events_daily', 'agg.events_daily'],
      ['events_monthly', 'agg.events_monthly'],
    ]);
    expect(buildGraph(rollups.map((r) => r.rollup)).nodes.map((n) => n.name)).toEqual([
      'events.raw',
      'events_hourly',
      'agg.events_hourly',
      'events_daily',
      'agg.events_daily',
      'events_monthly',
      'agg.events_monthly',
    ]);
  });

  it('accepts a chain, and each output takes its rollup domain', () => {
    const config = parseConfig({
      rollups: [rollup('hourly', ['raw'], 'agg.hourly'), rollup('daily', ['agg.hourly'], 'agg.daily')],
    });
    expect(defineRollups(config).map((r) => r.rollup.output)).toEqual(['agg.hourly', 'agg.daily']);
  });

  it('refuses a reader in another domain than the rollup that writes its upstream', () => {
    const config = parseConfig({
      rollups: [
        rollup('hourly', ['raw'], 'agg.hourly'),
        { ...rollup('buckets', ['agg.hourly']), every: 100, begin: 0 },
      ],
    });
    expect(() => defineRollups(config)).toThrow(
      'rollups[buckets].upstream: asset agg.hourly is the output of time rollup hourly but this rollup is integer',
    );
    const declared = parseConfig({
      assets: [{ name: 'agg.hourly', domain: 'integer' }],
      rollups: [rollup('hourly', ['raw'], 'agg.hourly')],
    });
    expect(() => defineRollups(declared)).toThrow(
      'rollups[hourly].output: asset agg.hourly is declared integer',
    );
  });
});
