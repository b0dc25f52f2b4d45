/**
 * The graph page (`/graph`): every configured rollup and the assets it reads and writes, drawn as
 * a server-side SVG in layers left to right (graph-layout.ts), each node marked with its state:
 * stale assets, rollups with failed runs, periods owing a rerun, periods waiting. Each node links
 * to its card on the status page. No scripts, like the rest of the page.
 */

import type { GraphJson } from '../load/model.js';
import { layoutGraph, NODE_HEIGHT, NODE_WIDTH } from './graph-layout.js';
import { html, pageHref, type SafeHtml } from './html.js';

type Node = GraphJson['nodes'][number];

/** Node states, their colour (the bar at the node's left) and legend text. */
const STATES: Record<Node['state'], readonly [string, string]> = {
  failed: ['#b3261e', 'rollup: failed runs'],
  rerun_pending: ['#9b59d0', 'rollup: rerun pending'],
  waiting: ['#b6bcc6', 'rollup: periods waiting'],
  ok: ['#2563c9', 'rollup: nothing failed, owed or waiting'],
  stale: ['#d7443e', 'asset: stale (behind its max_lag)'],
  fresh: ['#2f9e5a', 'asset: fresh'],
  unknown: ['#e0e3e8', 'asset: no max_lag, or not seen yet'],
};

export const GRAPH_CSS = `
.graph { overflow: auto; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
svg.graph-svg { display: block; width: 100%; height: auto; }
svg.graph-svg text { font-size: 12px; fill: #1f2933; }
svg.graph-svg text.sub { font-size: 11px; fill: #5f6b7a; }
svg.graph-svg rect.node { fill: #fff; stroke: #9aa3ae; stroke-width: 1; }
svg.graph-svg rect.node.rollup { fill: #f3f6fb; }
svg.graph-svg a:hover rect.node { stroke: #111; stroke-width: 1.5; }
svg.graph-svg path.edge { fill: none; stroke: #9aa3ae; stroke-width: 1.2; }
svg.graph-svg path.edge.output { stroke: #2563c9; }
${Object.entries(STATES)
  .map(([state, [colour]]) => `.g-${state} { fill: ${colour}; background: ${colour}; }`)
  .join('\n')}
`;

/** The smallest the graph is drawn to fit the page (its 12 px labels at about 7 px). */
const MIN_SCALE = 0.6;
const MAX_LABEL = 27;
const label = (text: string) => (text.length > MAX_LABEL ? `${text.slice(0, MAX_LABEL - 1)}…` : text);

/** The second line of a node: what its state is made of. */
function detail(n: Node): string {
  if (n.kind === 'rollup') {
    const parts = [
      n.failed_runs > 0 ? `${n.failed_runs} failed` : '',
      n.rerun_pending > 0 ? `${n.rerun_pending} rerun pending` : '',
      n.waiting > 0 ? `${n.waiting} waiting` : '',
      `${n.triggered} triggered`,
    ].filter(Boolean);
    return parts.join(' · ');
  }
  if (n.freshness === null) return 'not seen yet';
  const lag = n.freshness.lag_seconds;
  const behind =
    lag === null
      ? ''
      : ` · ${lag < 120 ? `${Math.round(lag)} s` : lag < 7200 ? `${Math.round(lag / 60)} min` : `${Math.round(lag / 3600)} h`} behind`;
  return `${n.state === 'unknown' ? 'no max_lag' : n.state}${behind}`;
}

export function renderGraph(graph: GraphJson): SafeHtml {
  if (graph.nodes.length === 0) return html`<p class="none">No rollups are configured.</p>`;
  const layout = layoutGraph(graph);
  const pad = 4;
  const edges = graph.edges.map((e) => {
    const a = layout.at.get(e.from)!;
    const b = layout.at.get(e.to)!;
    const x1 = a.x + NODE_WIDTH + pad;
    const y1 = a.y + NODE_HEIGHT / 2 + pad;
    const x2 = b.x + pad;
    const y2 = b.y + NODE_HEIGHT / 2 + pad;
    const mid = (x1 + x2) / 2;
    return html`<path class="edge ${e.role}" d="M${x1} ${y1} C${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}"/>`;
  });
  const nodes = graph.nodes.map((n) => {
    const { x, y } = layout.at.get(n.id)!;
    const href = pageHref(n.kind === 'asset' ? { asset: n.name } : { rollup: n.name });
    const sub = detail(n);
    return html`<a href="${href}"><title>${n.kind} ${n.name}: ${sub}</title><g transform="translate(${x + pad} ${y + pad})"><rect class="node ${n.kind}" width="${NODE_WIDTH}" height="${NODE_HEIGHT}" rx="4"/><rect class="g-${n.state}" width="6" height="${NODE_HEIGHT}" rx="2"/><text x="12" y="14">${label(n.name)}</text><text class="sub" x="12" y="28">${label(sub)}</text></g></a>`;
  });
  // Fit to the page: the drawing scales down to the box's width (never up, and not below
  // MIN_SCALE, where labels would be too small to read: only a graph wider than that scrolls).
  const width = layout.width + 2 * pad;
  const height = layout.height + 2 * pad;
  const fit = `max-width: ${width}px; min-width: ${Math.round(width * MIN_SCALE)}px`;
  return html`<div class="graph"><svg class="graph-svg" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" style="${fit}" role="img" aria-label="rollup graph">${edges}${nodes}</svg></div>`;
}

export function graphLegend(): SafeHtml {
  return html`<div class="legend" role="list">${Object.entries(STATES).map(
    ([state, [, text]]) => html`<span><span class="sw g-${state}"></span> ${text}</span>`,
  )}<span>Assets feed the rollups to their right (grey edges); a rollup writes its output asset (blue edges). Click a node for its coverage or periods.</span></div>`;
}
