/** One card per asset (headline, coverage timeline, gap list) and per rollup (headline, period strip, periods needing attention). */
import type { Domain, Interval } from '../../../core/types.js';
import type { AssetView, PageView, PeriodDetail, PieceDetail, Problem, RollupView } from '../load/model.js';
import { PERIOD_STATES } from '../load/model.js';
import { formatLength, formatPointText, formatRatio } from './format.js';
import { assetHeadline, plural, rollupHeadline } from './headlines.js';
import { html, pageHref, type SafeHtml } from './html.js';
import { periodHref } from './period-page.js';
import type { DrawItem } from './pixels.js';
import { RUN_STATE_TEXT } from './run-text.js';
import { STATE_TEXT } from './state-text.js';
import { renderTrack } from './timeline.js';
import { boundParam } from './window.js';
import { windowNav } from './window-nav.js';

const span = (domain: Domain, i: Interval) =>
  `${formatPointText(domain, i.start)} → ${formatPointText(domain, i.end)}`;

export function renderAssetCard(view: AssetView, page: PageView): SafeHtml {
  const { domain, window } = view;
  const track = renderTrack<PieceDetail>({
    label: `coverage of ${view.name}`,
    kind: 'coverage',
    domain,
    window,
    items: view.items,
    now: domain === 'time' ? page.now : undefined,
    describe: (item) => describePiece(domain, item),
    data: (item) => ({ version: item.detail?.version ?? undefined }),
  });
  const extent = view.extent === null ? 'nothing covered yet' : `covered extent ${span(domain, view.extent)}`;
  const f = view.freshness;
  return html`<section class="card asset" data-asset="${view.name}" data-stale="${f.stale === null ? 'unknown' : String(f.stale)}">
<header><h3><a href="${pageHref({ asset: view.name })}">${view.name}</a></h3>${assetHeadline(view)}</header>
${f.stale ? html`<p class="stale-reason bad">stale: ${f.stale_reason}</p>` : ''}
<p class="facts">${domain} · ${plural(view.eventCount, 'event', 'events')} · ${plural(view.segmentCount, 'segment', 'segments')} · ${extent}</p>
<p class="window">${span(domain, window)}${domain === 'time' ? ' UTC' : ''} (${formatLength(domain, window.end - window.start)}) · ${formatRatio(view.ratio)} of this window complete${view.missing > 0 ? ` · ${formatLength(domain, view.missing)} missing` : ''}</p>
${windowNav({ asset: view.name }, domain, window, page)}
<div class="timeline">${track}</div>
${problemList(view)}
</section>`;
}

function describePiece(domain: Domain, item: DrawItem<PieceDetail>): string {
  const head = `${STATE_TEXT[item.state] ?? item.state}: ${span(domain, item)} (${formatLength(domain, item.end - item.start)})`;
  if (item.count > 1) return `${head}: ${item.count.toLocaleString('en-US')} pieces, ${shares(item.weights)}`;
  const d = item.detail;
  if (d?.requiredVersion) return `${head}, version ${d.version ?? 'none'}, rebuild at ${d.requiredVersion}`;
  return d?.version ? `${head}, version ${d.version}` : head;
}

/** `99.80 % complete, 0.20 % gap`: the share of each state, largest first. */
function shares(weights: Record<string, number>): string {
  const total = Object.values(weights).reduce((a, b) => a + b, 0);
  return Object.entries(weights)
    .sort((a, b) => b[1] - a[1])
    .map(([state, w]) => `${formatRatio(w / total)} ${STATE_TEXT[state] ?? state}`)
    .join(', ');
}

function summary(view: AssetView): string {
  const count = (n: number, one: string, many: string) =>
    `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;
  const parts = [
    view.gapCount > 0 ? count(view.gapCount, 'gap', 'gaps') : '',
    view.replayCount > 0 ? count(view.replayCount, 'range to replay', 'ranges to replay') : '',
  ];
  return parts.filter((p) => p !== '').join(' and ');
}

function problemList(view: AssetView): SafeHtml {
  const { domain } = view;
  if (view.problemCount === 0) {
    return html`<p class="none">No gaps or replay requirements inside the covered extent in this window.</p>`;
  }
  const pad = (p: Problem) => Math.max(p.end - p.start, domain === 'time' ? 5 * 60_000_000 : 1);
  const rows = view.problems.map(
    (p) =>
      html`<li data-state="${p.state}" data-start="${boundParam(domain, p.start)}" data-end="${boundParam(domain, p.end)}"><span class="sw s-${p.state}"></span> <span class="what">${STATE_TEXT[p.state]}</span> ${span(domain, p)} <span class="len">(${formatLength(domain, p.end - p.start)})</span>${p.state === 'replay_required' ? html` <span class="ver">version ${p.version ?? 'none'} → ${p.requiredVersion ?? ''}</span>` : ''} <a href="${pageHref({ asset: view.name, start: boundParam(domain, p.start - pad(p)), end: boundParam(domain, p.end + pad(p)) })}">zoom</a></li>`,
  );
  const more = view.problemCount - view.problems.length;
  return html`<details class="problems" open><summary>${summary(view)} in this window (newest first)</summary><ol>${rows}</ol>${more > 0 ? html`<p class="more">and ${more.toLocaleString('en-US')} more; zoom in to list them</p>` : ''}</details>`;
}

export function renderRollupCard(view: RollupView, page: PageView): SafeHtml {
  const { domain, window } = view;
  const track = renderTrack<PeriodDetail>({
    label: `periods of rollup ${view.id}`,
    kind: 'periods',
    domain,
    window,
    items: view.items,
    now: domain === 'time' ? page.now : undefined,
    describe: (item) => describePeriod(view, item),
    data: (item) => ({
      key: item.detail?.key,
      generation: item.detail?.generation,
      reason: item.detail?.reason ?? undefined,
    }),
    text: (item) => (item.detail && item.detail.generation > 0 ? `#${item.detail.generation}` : undefined),
    // Completeness matters while a period is not triggered: shade how much of it is there.
    fill: (item) =>
      item.detail !== undefined && (item.state === 'waiting' || item.state === 'missed')
        ? item.detail.ratio
        : undefined,
    href: (item) => item.detail?.href,
  });
  const counts = PERIOD_STATES.filter((s) => view.counts[s] > 0).map(
    (s) =>
      html`<span class="count"><span class="sw s-${s}"></span> ${view.counts[s].toLocaleString('en-US')} ${STATE_TEXT[s]}</span> `,
  );
  const upstream = view.upstream.map(
    (name, i) => html`${i > 0 ? ', ' : ''}<a href="${pageHref({ asset: name })}">${name}</a>`,
  );
  return html`<section class="card rollup" data-rollup="${view.id}">
<header><h3><a href="${pageHref({ rollup: view.id })}">${view.id}</a></h3>${rollupHeadline(view)}</header>
<p class="facts">every ${view.every}${domain === 'time' ? ` in ${view.timezone}` : ''} · upstream ${upstream} · ${view.policy} · rerun ${view.rerun} · target ${view.target} · from ${view.source === 'api' ? 'the API' : 'the config file'}</p>
<p class="facts">${lastTrigger(view)}</p>
<p class="window">${span(domain, window)}${domain === 'time' ? ' UTC' : ''} · ${counts.length > 0 ? counts : 'no periods in this window'}</p>
${windowNav({ rollup: view.id }, domain, window, page)}
<div class="timeline">${track}</div>
${attentionList(view)}
</section>`;
}

/** The newest periods of the window that are missed, owed a rerun or late, each linked to its why. */
function attentionList(view: RollupView): SafeHtml | string {
  if (view.attentionCount === 0) return '';
  const rows = view.attention.map(
    (p) =>
      html`<li data-state="${p.state}" data-key="${p.key}"><span class="sw s-${p.state}"></span> <a href="${p.href}">${p.key}</a> ${STATE_TEXT[p.state]} · ${formatRatio(p.ratio)} complete</li>`,
  );
  const more = view.attentionCount - view.attention.length;
  return html`<details class="problems attention" open><summary>${plural(view.attentionCount, 'period', 'periods')} missed, owed a rerun or late in this window (newest first): why?</summary><ol>${rows}</ol>${more > 0 ? html`<p class="more">and ${more.toLocaleString('en-US')} more</p>` : ''}</details>`;
}

function describePeriod(view: RollupView, item: DrawItem<PeriodDetail>): string {
  if (item.count > 1 || item.detail === undefined) {
    const counts = Object.entries(item.weights)
      .sort((a, b) => b[1] - a[1])
      .map(([s, n]) => `${n.toLocaleString('en-US')} ${STATE_TEXT[s] ?? s}`);
    return `${item.count.toLocaleString('en-US')} periods ${span(view.domain, item)}: ${counts.join(', ')}`;
  }
  const d = item.detail;
  const parts = [
    `${d.key}: ${STATE_TEXT[item.state] ?? item.state}`,
    `${view.formatPoint(item.start)} → ${view.formatPoint(item.end)}`,
    `ratio ${formatRatio(d.ratio)}`,
  ];
  if (d.generation > 0) parts.push(`generation ${d.generation}`);
  if (d.reason) parts.push(`reason ${d.reason}`);
  if (d.triggeredAt) parts.push(`triggered ${d.triggeredAt.toISOString()}`);
  if (d.run) parts.push(`run ${RUN_STATE_TEXT[d.run.state]} (attempt ${d.run.attempt})`);
  parts.push('click for why');
  return parts.join(' · ');
}

function lastTrigger(view: RollupView): SafeHtml {
  const t = view.lastTrigger;
  if (t === null) return html`<span class="last">no trigger yet</span>`;
  const delivery = t.deliveredAt
    ? 'delivered'
    : t.failedAt
      ? html`<span class="bad">delivery failed: ${t.lastError ?? 'unknown error'}</span>`
      : t.attempts > 0
        ? html`<span class="warn">delivering, ${t.attempts} attempts${t.lastError ? `: ${t.lastError}` : ''}</span>`
        : 'delivery pending';
  return html`<span class="last">last trigger: <strong>${t.reason}</strong> at ${formatPointText('time', t.decidedAt.getTime() * 1000)} UTC · period <a href="${periodHref(view.id, t.key)}">${t.key}</a> #${t.generation} · ${delivery}</span>`;
}

/** Rollups named on an unseen upstream's card; the rest are counted. */
const WAITING_NAMED = 10;

/** An upstream no event has named yet: nothing to draw, but the reason its rollups wait. */
export function renderUnseenCard(unseen: PageView['unseen'][number]): SafeHtml {
  const { name, waiting } = unseen;
  const links = waiting
    .slice(0, WAITING_NAMED)
    .map((id, i) => html`${i > 0 ? ', ' : ''}<a href="${pageHref({ rollup: id })}">${id}</a>`);
  const more = waiting.length > WAITING_NAMED ? ` and ${waiting.length - WAITING_NAMED} more` : '';
  return html`<section class="card asset" data-asset="${name}" data-seen="false">
<header><h3><a href="${pageHref({ asset: name })}">${name}</a></h3><span class="headline"><span class="badge bad">never seen</span></span></header>
<p class="facts">${name} has never been seen: no event for it has been ingested yet. ${waiting.length === 1 ? 'Rollup' : 'Rollups'} ${links}${more} wait${waiting.length === 1 ? 's' : ''} for it.</p>
</section>`;
}
