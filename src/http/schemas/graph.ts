/** `GET /v1/graph`: assets and rollups as a graph, with each node's state. */
import { z } from 'zod';
import { defineOperation } from '../operation.js';
import { Freshness } from './common.js';

const NodeId = z.string().meta({ description: '"asset:NAME" or "rollup:ID"' });

export const AssetNodeState = z.enum(['stale', 'fresh', 'unknown']).meta({
  description: 'stale: behind its freshness.max_lag; fresh: within it; unknown: no max_lag configured',
});
export const RollupNodeState = z.enum(['failed', 'rerun_pending', 'waiting', 'ok']).meta({
  description: 'the worst of: failed runs, periods owing a rerun, periods waiting for coverage; else ok',
});

export const AssetNode = z.object({
  id: NodeId,
  kind: z.literal('asset'),
  name: z.string(),
  depth: z.int().meta({ description: 'layer from the left: 0 for assets no rollup writes' }),
  state: AssetNodeState,
  written_by: z.string().nullable().meta({ description: 'the rollup whose output it is' }),
  freshness: Freshness.nullable().meta({ description: 'null for an asset the index has not seen' }),
});

export const RollupNode = z.object({
  id: NodeId,
  kind: z.literal('rollup'),
  name: z.string(),
  depth: z.int().meta({ description: 'one layer right of its deepest upstream' }),
  state: RollupNodeState,
  failed_runs: z.int().meta({ description: 'periods whose latest run failed, timed out or was lost' }),
  waiting: z.int(),
  rerun_pending: z.int(),
  triggered: z.int(),
  missed: z.int(),
});

export const GraphEdge = z.object({
  from: NodeId,
  to: NodeId,
  role: z
    .enum(['upstream', 'output'])
    .meta({ description: 'asset -> rollup it feeds; rollup -> asset it writes' }),
});

export const GraphAnswer = z.object({
  nodes: z.array(z.discriminatedUnion('kind', [AssetNode, RollupNode])).meta({
    description:
      'by depth, then kind and name: the configured rollups, their upstreams and outputs, and declared assets',
  }),
  edges: z.array(GraphEdge),
});

export const getGraph = defineOperation({
  method: 'GET',
  path: '/v1/graph',
  id: 'getGraph',
  summary: 'Assets and rollups with their edges and states',
  description:
    'Every configured rollup, every asset one reads or writes and every declared asset, laid out in layers (depth) so each edge points to a deeper node.',
  access: 'read',
  answers: { 200: { description: 'the graph', schema: GraphAnswer } },
  errors: {},
});
