/**
 * The status page's shell: inline CSS, legend, sections; the period page and the error page. No
 * scripts: the pages reload themselves with a meta refresh, keeping their query (focus, window).
 */

import type { Rollup } from '../../../core/rollups/rollup.js';
import type { GraphJson, PageView, PeriodExplanation } from '../load/model.js';
import { renderAssetCard, renderRollupCard, renderUnseenCard } from './cards.js';
import { GRAPH_CSS, graphLegend, renderGraph } from './graph-page.js';
import { html, pageHref, raw, type SafeHtml } from './html.js';
import { renderOverviewAssets, renderOverviewRollups } from './overview.js';
import { renderPeriodBody } from './period-page.js';
import { renderOpenRepairs } from './repair-views.js';
import { runCss } from './run-text.js';
import { renderFailedRuns } from './run-views.js';
import { pageNav } from './window-nav.js';

/** Sent with the page: nothing but inline styles may load or run, whatever text slipped through. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const COLOURS: Record<string, string> = {
  complete: '#2f9e5a',
  gap: '#d7443e',
  outside: '#f5c6c2',
  behind: '#e58f88',
  replay_required: '#f0a22e',
  waiting: '#b6bcc6',
  settling: '#7cc4e8',
  triggered: '#2563c9',
  rerun_pending: '#9b59d0',
  missed: '#6b1d2a',
  run_failed: '#d7443e',
};

const CSS = raw(`
:root { color-scheme: light; --ink: #1f2933; --muted: #5f6b7a; --line: #d5dae1; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #f6f7f9; }
header.page { background: #1f2933; color: #fff; padding: 12px 24px; display: flex; flex-wrap: wrap; gap: 8px 24px; align-items: baseline; }
header.page h1 { font-size: 18px; margin: 0; }
header.page a { color: #cfe3ff; }
main { padding: 12px 24px 32px; max-width: 1180px; }
h2 { font-size: 16px; margin: 20px 0 8px; }
a { color: #1d5fbf; }
.page-nav, .legend, .notes { margin: 8px 0; }
.page-nav a, .page-nav strong, .window-nav .presets a, .window-nav .presets strong { margin: 0 3px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; color: var(--muted); font-size: 13px; }
.legend span.group { font-weight: 600; color: var(--ink); }
.sw { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 10px 0; overflow-x: auto; }
.card header { display: flex; flex-wrap: wrap; justify-content: space-between; gap: 4px 16px; align-items: baseline; }
.card h3 { margin: 0; font-size: 15px; overflow-wrap: anywhere; }
.card p { margin: 3px 0; }
.facts, .window, .last, .more, .none { color: var(--muted); font-size: 13px; overflow-wrap: anywhere; }
.ok { color: #1e7b43; } .bad { color: #b3261e; } .warn { color: #9a5b00; }
.window-nav { font-size: 13px; margin: 4px 0; }
.window-nav > a { margin-right: 8px; }
.timeline { overflow-x: auto; }
svg.track { display: block; width: 100%; max-width: 1096px; height: auto; }
svg.track text { font-size: 11px; fill: #4b5563; }
svg.track .tick-sub { fill: #1f2933; font-weight: 600; }
svg.track .bar-text { fill: #fff; font-weight: 600; pointer-events: none; }
svg.track .plot { fill: #eef0f3; stroke: #c9ced6; stroke-width: 0.5; }
svg.track .tick { stroke: #6b7280; stroke-width: 0.8; }
svg.track .grid { stroke: #c3c8d0; stroke-width: 0.6; }
svg.track .axis { stroke: #6b7280; stroke-width: 0.8; }
svg.track .now { stroke: #111; stroke-width: 1.2; stroke-dasharray: 3 2; }
.problems summary { cursor: pointer; font-size: 13px; margin-top: 4px; }
.problems ol { margin: 4px 0; padding-left: 22px; font-size: 13px; }
.problems .len, .problems .ver { color: var(--muted); }
.count { margin-right: 10px; white-space: nowrap; }
.search { margin: 8px 0; font-size: 13px; }
table.overview { border-collapse: collapse; background: #fff; width: 100%; font-size: 13px; }
table.overview th, table.overview td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; white-space: nowrap; }
table.overview td.num, table.overview th.num { text-align: right; }
table.overview td.why { white-space: normal; min-width: 240px; }
.headline { font-weight: 600; font-size: 13px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 12px; }
.badge.bad { background: #b3261e; } .badge.ok { background: #1e7b43; } .badge.none { background: #8a94a3; }
.stale-reason { font-size: 13px; margin: 2px 0; }
.off { color: #9aa3ae; margin-right: 8px; }
svg.track .fill { fill: #2f9e5a; fill-opacity: 0.75; }
svg.track a:hover rect { stroke: #111; stroke-width: 1; }
details.healthy { margin: 10px 0; }
details.healthy > summary { cursor: pointer; color: #1e7b43; font-weight: 600; }
ul.why { padding-left: 20px; } ul.why li { margin: 4px 0; }
table.upstreams td { white-space: normal; vertical-align: top; } table.upstreams ol { margin: 2px 0; padding-left: 18px; }
.card h2 { margin: 0; font-size: 16px; }
p.error { background: #fff4f2; border: 1px solid #f3b9b2; padding: 10px 14px; border-radius: 6px; }
.run-badge { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 12px; white-space: nowrap; }
table.runs td.error { white-space: normal; min-width: 200px; max-width: 460px; overflow-wrap: anywhere; }
table.runs td.has-error { background: #fff4f2; }
table.run-history td { white-space: normal; vertical-align: top; }
table.run-history .nw { white-space: nowrap; }
table.runs td.id { font-family: ui-monospace, monospace; font-size: 12px; overflow-wrap: anywhere; min-width: 16ch; }
main.wide { max-width: 1440px; }
.scroll { overflow-x: auto; }
@media (max-width: 900px) {
  table.run-history thead { display: none; }
  table.run-history, table.run-history tbody, table.run-history tr, table.run-history td { display: block; width: auto; }
  table.run-history tr { border-bottom: 1px solid var(--line); padding: 6px 0; }
  table.overview th, table.overview td { white-space: normal; }
  table.overview td a { overflow-wrap: anywhere; }
  table.run-history td, table.run-history td.num, table.runs.run-history td.error { border: 0; padding: 1px 8px; text-align: left; max-width: none; min-width: 0; }
  table.run-history td:empty { display: none; }
  table.run-history td::before { content: attr(data-label) ": "; color: var(--muted); }
}
table.open-repairs td.ranges { white-space: normal; min-width: 240px; }
${Object.entries(COLOURS)
  .map(([state, colour]) => `.s-${state} { fill: ${colour}; background: ${colour}; }`)
  .join('\n')}
${runCss()}
${GRAPH_CSS}
`);

const LEGEND_COVERAGE = [
  ['complete', 'complete'],
  ['gap', 'gap'],
  ['replay_required', 'replay required'],
  ['outside', 'before the covered extent'],
  ['behind', 'after it, behind now (the lag)'],
] as const;
const LEGEND_PERIODS = [
  ['waiting', 'waiting (green from below: the share there)'],
  ['settling', 'settling'],
  ['triggered', 'triggered (#generation)'],
  ['rerun_pending', 'rerun pending'],
  ['missed', 'missed'],
  ['run_failed', 'triggered, its run failed, timed out or was lost'],
] as const;

function legend(): SafeHtml {
  const entry = ([state, text]: readonly [string, string]) =>
    html`<span><span class="sw s-${state}"></span> ${text}</span>`;
  return html`<div class="legend" role="list"><span class="group">Coverage</span>${LEGEND_COVERAGE.map(entry)}<span class="group">Periods</span>${LEGEND_PERIODS.map(entry)}<span>Where a pixel holds several pieces it shows the main state, with a mark on top for the most severe one; hover for details, click a period to see why it is in its state. The dashed line is now. Times in UTC.</span></div>`;
}

/** Seconds between reloads of the status and period pages. */
const REFRESH_SECONDS = 60;

function shell(title: string, body: SafeHtml, refresh = false): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">${refresh ? html`<meta http-equiv="refresh" content="${REFRESH_SECONDS}">` : ''}
<title>${title}</title><style>${CSS}</style></head>
<body>${body}</body></html>
`.value;
}

export function renderPage(page: PageView): string {
  const assets = collapseHealthy(
    page,
    page.assets,
    (a) => a.freshness.stale === false && a.problemCount === 0,
    (a) => renderAssetCard(a, page),
    ['asset', 'assets', 'fresh within their max_lag, no gaps in this window'],
  );
  const rollups = collapseHealthy(
    page,
    page.rollups,
    (r) => r.failedRuns === 0 && r.totals.missed === 0 && r.totals.rerun_pending === 0 && r.lateWaiting === 0,
    (r) => renderRollupCard(r, page),
    ['rollup', 'rollups', 'no failed run, nothing missed, owed a rerun or late'],
  );
  const notes = page.notes.map((n) => html`<p class="error">${n}</p>`);
  const body = html`${pageHeader(page.generatedAt)}
<main>${notes}${search(page)}${pageNav(page)}${renderFailedRuns(page.failedRuns, page.generatedAt.getTime())}${renderOpenRepairs(page.repairs, page.generatedAt.getTime())}${legend()}
<h2>Assets <span class="more">${shown(page, page.overview?.assets.length ?? page.unseen.length + page.assets.length, page.paging.assetsTotal)} · never seen and stale first, then the longest behind now</span></h2>${page.overview ? renderOverviewAssets(page.overview.assets) : html`${page.unseen.map(renderUnseenCard)}${page.unseen.length > 0 && page.assets.length === 0 ? '' : assets}`}
<h2>Rollups <span class="more">${shown(page, page.overview?.rollups.length ?? page.rollups.length, page.paging.rollupsTotal)} · most failed runs, missed, owed and waiting first</span></h2>${page.overview ? renderOverviewRollups(page.overview.rollups) : rollups}
${pager(page)}
</main>`;
  return shell('coverage-rollup status', body, true);
}

export function renderPeriodPage(rollup: Rollup, answer: PeriodExplanation, nowMs: number): string {
  const body = html`${pageHeader(new Date(nowMs))}<main class="wide">${renderPeriodBody(rollup, answer, nowMs)}</main>`;
  return shell(`${rollup.id} ${answer.period.key}: ${answer.period.state}`, body, true);
}

/** The rollup graph page (`/graph`), drawn from the same answer as `GET /v1/graph`. */
export function renderGraphPage(graph: GraphJson, generatedAt: Date): string {
  const rollups = graph.nodes.filter((n) => n.kind === 'rollup').length;
  const body = html`${pageHeader(generatedAt)}<main><h2>Rollup graph <span class="more">${rollups} rollups, ${graph.nodes.length - rollups} assets · <a href="/v1/graph">/v1/graph</a></span></h2>${graphLegend()}${renderGraph(graph)}</main>`;
  return shell('coverage-rollup graph', body, true);
}

function pageHeader(generatedAt: Date): SafeHtml {
  return html`<header class="page"><h1><a href="/">coverage-rollup</a> status</h1><span>generated ${generatedAt.toISOString()} · reloads every ${REFRESH_SECONDS} s</span><span><a href="/graph">graph</a> · <a href="/v1/assets">/v1/assets</a> · <a href="/v1/rollups">/v1/rollups</a> · <a href="/readyz">/readyz</a> · <a href="/metrics">/metrics</a></span></header>`;
}

/**
 * Cards that need attention first, in their order; the healthy ones folded under one line. A
 * focused page (one asset or rollup and its neighbours) folds nothing: it is there to be read.
 */
function collapseHealthy<T>(
  page: PageView,
  items: readonly T[],
  healthy: (item: T) => boolean,
  card: (item: T) => SafeHtml,
  [one, many, why]: readonly [string, string, string],
): SafeHtml {
  if (items.length === 0) return html`<p class="none">No ${many} to show.</p>`;
  if (page.focus.asset !== undefined || page.focus.rollup !== undefined) return html`${items.map(card)}`;
  const fine = items.filter(healthy);
  const rest = items.filter((item) => !healthy(item));
  const folded =
    fine.length === 0
      ? ''
      : html`<details class="healthy"><summary>${fine.length} healthy ${fine.length === 1 ? one : many} (${why})</summary>${fine.map(card)}</details>`;
  return html`${rest.map(card)}${folded}`;
}

function shown(page: PageView, count: number, total: number): string {
  if (count === 0) return `0 of ${total}`;
  const first = (page.paging.page - 1) * page.paging.pageSize + 1;
  return `${first}–${first + count - 1} of ${total}`;
}

/** A filter on names: the overview stays one small page at thousands of assets and rollups. */
function search(page: PageView): SafeHtml {
  const hidden = Object.entries({ ...page.focus, ...(page.preset ? { window: page.preset } : {}) }).map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`,
  );
  return html`<form class="search" method="get" action="/">${hidden}<label>filter by name <input type="search" name="q" value="${page.paging.q ?? ''}"></label> <button type="submit">filter</button>${page.paging.q === undefined ? '' : html` <a href="${pageHref({ ...page.focus })}">clear</a>`}</form>`;
}

function pager(page: PageView): SafeHtml | string {
  const { page: n, pageSize, assetsTotal, rollupsTotal } = page.paging;
  const pages = Math.max(1, Math.ceil(Math.max(assetsTotal, rollupsTotal) / pageSize));
  if (pages === 1) return '';
  const href = (p: number) =>
    pageHref({
      ...page.focus,
      q: page.paging.q,
      window: page.preset ?? undefined,
      page: p === 1 ? undefined : p,
    });
  return html`<nav class="page-nav" aria-label="pages">page ${n} of ${pages}: ${n > 1 ? html`<a href="${href(n - 1)}" rel="prev">previous</a>` : ''} ${n < pages ? html`<a href="${href(n + 1)}" rel="next">next</a>` : ''}</nav>`;
}

export function renderErrorPage(message: string, what = 'bad request'): string {
  return shell(
    `coverage-rollup status: ${what}`,
    html`<header class="page"><h1><a href="/">coverage-rollup</a> status</h1></header><main><p class="error">${message}</p><p><a href="/">back to the status page</a></p></main>`,
  );
}
