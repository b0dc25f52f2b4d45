/** One card per asset (coverage timeline, ratio, gap list) and per rollup (period strip). */
import type { Domain, Interval } from '../../core/types.js';
import { formatLength, formatPointText, formatRatio } from './format.js';
import { html, pageHref, type SafeHtml } from './html.js';
import type { AssetView, PageView, PeriodDetail, PieceDetail, Problem, RollupView } from './model.js';
import { PERIOD_STATES } from './model.js';
import { periodHref } from './period-page.js';
import type { DrawItem } from './pixels.js';
import { renderTrack } from './timeline.js';
import { boundParam, nextPreset, PRESETS, type PresetName, pan, zoom } from './window.js';

type Focus = { asset?: string; rollup?: string };

const STATE_TEXT: Record<string, string> = {
  complete: 'complete',
  gap: 'gap',
  outside: 'gap (outside the covered extent)',
  behind: 'behind now (after the covered extent)',
  replay_required: 'replay required',
  waiting: 'waiting',
  settling: 'settling',
  triggered: 'triggered',
  rerun_pending: 'rerun pending',
  missed: 'missed',
};

const span = (domain: Domain, i: Interval) =>
  `${formatPointText(domain, i.start)} → ${formatPointText(domain, i.end)}`;

const presetOfWidth = (width: number): PresetName | undefined =>
  PRESETS.find(([, size]) => size === width)?.[0];

/**
 * Zoom, pan and preset links that focus the page on this card. A time window ending at now keeps
 * following it: zooming steps through the presets. An explicit window zooms around its end, so
 * the newest data stays in view, and panning later than now comes back to following now.
 */
export function windowNav(focus: Focus, domain: Domain, window: Interval, page: PageView): SafeHtml {
  const at = (w: Interval, label: string, title: string) =>
    html`<a href="${pageHref({ ...focus, start: boundParam(domain, w.start), end: boundParam(domain, w.end) })}" title="${title}">${label}</a>`;
  const toPreset = (name: PresetName | undefined, label: string, title: string) =>
    name === undefined
      ? html`<span class="off">${label}</span>`
      : html`<a href="${pageHref({ ...focus, window: name })}" title="${title}">${label}</a>`;
  const width = window.end - window.start;
  const follows = domain === 'time' && page.followsNow && page.preset !== null;
  const earlier = at(pan(window, -0.5, domain), '◀ earlier', 'move half a window earlier');
  let zoomIn: SafeHtml;
  let zoomOut: SafeHtml;
  let later: SafeHtml;
  if (follows) {
    zoomIn = toPreset(nextPreset(page.preset!, -1), '+ zoom in', 'a narrower window, still ending at now');
    zoomOut = toPreset(nextPreset(page.preset!, 1), '− zoom out', 'a wider window, still ending at now');
    later = html`<span class="off" title="the window ends at now">later ▶</span>`;
  } else {
    zoomIn = at(zoom(window, 0.5, domain), '+ zoom in', 'half as wide, same end');
    zoomOut = at(zoom(window, 2, domain), '− zoom out', 'twice as wide, same end');
    const next = pan(window, 0.5, domain);
    const back = presetOfWidth(width);
    later =
      domain === 'time' && next.end >= page.now
        ? back !== undefined
          ? toPreset(back, 'later ▶', 'back to the window ending at now')
          : at({ start: page.now - width, end: page.now }, 'later ▶', 'the window ending at now')
        : at(next, 'later ▶', 'move half a window later');
  }
  const presets =
    domain === 'time'
      ? PRESETS.map(([name]) =>
          follows && name === page.preset
            ? html`<strong>${name}</strong>`
            : html`<a href="${pageHref({ ...focus, window: name, end: follows ? undefined : boundParam(domain, window.end) })}">${name}</a>`,
        )
      : [html`<a href="${pageHref(focus)}">full extent</a>`];
  const toNow =
    domain === 'time' && !follows
      ? html` <a href="${pageHref({ ...focus, window: presetOfWidth(width) })}" title="follow now">→ now</a>`
      : '';
  return html`<nav class="window-nav" aria-label="window">${earlier} ${zoomIn} ${zoomOut} ${later}${toNow} <span class="presets">${presets}</span></nav>`;
}

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
<p class="facts">${domain} · ${view.eventCount.toLocaleString('en-US')} events · ${view.segmentCount.toLocaleString('en-US')} segments · ${extent}</p>
<p class="window">${span(domain, window)}${domain === 'time' ? ' UTC' : ''} (${formatLength(domain, window.end - window.start)}) · ${formatRatio(view.ratio)} of this window complete${view.missing > 0 ? ` · ${formatLength(domain, view.missing)} missing` : ''}</p>
${windowNav({ asset: view.name }, domain, window, page)}
<div class="timeline">${track}</div>
${problemList(view)}
</section>`;
}

/**
 * Facts that no window changes, coloured by severity: stale or fresh against max_lag, the lag
 * (time) or the last event (integer), and the holes since the first event.
 */
function assetHeadline(view: AssetView): SafeHtml {
  const f = view.freshness;
  const verdict =
    f.stale === true
      ? html`<span class="badge bad">stale</span>`
      : f.stale === false
        ? html`<span class="badge ok" title="within max_lag ${f.max_lag}">fresh</span>`
        : html`<span class="badge none" title="set freshness.max_lag for this asset to have it judged">no max_lag</span>`;
  const tone = f.stale === true ? 'bad' : '';
  let lag: SafeHtml;
  if (f.covered_until === null) lag = html`<span class="lag ${tone}">nothing complete yet</span>`;
  else if (f.lag_seconds !== null) {
    lag = html`<span class="lag ${tone}" data-lag-seconds="${f.lag_seconds}">${f.lag_seconds > 0 ? `${formatLength('time', f.lag_seconds * SECOND)} behind now` : 'up to now'}</span>`;
  } else {
    const ago =
      f.last_event_at === null
        ? 'no event yet'
        : `last event ${formatPointText('time', Date.parse(f.last_event_at) * 1000)} UTC`;
    lag = html`<span class="lag ${tone}">covered until ${String(f.covered_until)} · ${ago}</span>`;
  }
  const { gaps, replayRequired } = view.history;
  const holes: SafeHtml[] = [];
  if (gaps > 0)
    holes.push(html`<span class="holes bad">${plural(gaps, 'gap', 'gaps')} since the first event</span>`);
  if (replayRequired > 0) {
    holes.push(html`<span class="holes warn">${plural(replayRequired, 'range', 'ranges')} to replay</span>`);
  }
  if (holes.length === 0 && f.covered_until !== null) {
    holes.push(html`<span class="holes ok">no holes since the first event</span>`);
  }
  return html`<span class="headline">${verdict} ${lag}${holes.map((h) => html` · ${h}`)}</span>`;
}

const SECOND = 1_000_000;
const plural = (n: number, one: string, many: string) =>
  `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

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
<p class="facts">every ${view.every}${domain === 'time' ? ` in ${view.timezone}` : ''} · upstream ${upstream} · ${view.policy} · rerun ${view.rerun} · target ${view.target}</p>
<p class="facts">${lastTrigger(view)}</p>
<p class="window">${span(domain, window)}${domain === 'time' ? ' UTC' : ''} · ${counts.length > 0 ? counts : 'no periods in this window'}</p>
${windowNav({ rollup: view.id }, domain, window, page)}
<div class="timeline">${track}</div>
${attentionList(view)}
</section>`;
}

/**
 * Period counts over the rollup's whole history (no window changes them), worst first and
 * coloured by severity, and the newest period with how much of it is there.
 */
function rollupHeadline(view: RollupView): SafeHtml {
  const t = view.totals;
  const parts: SafeHtml[] = [];
  if (t.missed > 0)
    parts.push(
      html`<span class="bad" data-count="missed">${plural(t.missed, 'missed period', 'missed periods')}</span>`,
    );
  if (t.rerun_pending > 0) {
    parts.push(
      html`<span class="warn" data-count="rerun_pending">${plural(t.rerun_pending, 'rerun', 'reruns')} pending</span>`,
    );
  }
  if (view.lateWaiting > 0) {
    const late = view.domain === 'time' ? 'waiting past their end' : 'waiting behind the newest';
    parts.push(
      html`<span class="warn" data-count="late">${view.lateWaiting.toLocaleString('en-US')} ${late}</span>`,
    );
  }
  if (parts.length === 0) parts.push(html`<span class="ok">nothing missed, owed or late</span>`);
  if (t.settling > 0) parts.push(html`<span>${t.settling.toLocaleString('en-US')} settling</span>`);
  const c = view.current;
  const current =
    c === null
      ? ''
      : html` · ${view.domain === 'time' ? 'current' : 'newest'} period <a href="${c.href}">${c.key}</a> ${STATE_TEXT[c.state]}${c.state === 'waiting' ? ` (${formatRatio(c.ratio)})` : ''}`;
  return html`<span class="headline">${parts.map((p, i) => html`${i > 0 ? ' · ' : ''}${p}`)}${current}</span>`;
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

/** Preset links for the whole page: every time card shares one window ending at now. */
export function pageNav(page: PageView): SafeHtml {
  const links = PRESETS.map(([name]) =>
    page.followsNow && name === page.preset
      ? html`<strong>${name}</strong>`
      : html`<a href="${pageHref({ ...page.focus, window: name })}">${name}</a>`,
  );
  const all = page.focus.asset !== undefined || page.focus.rollup !== undefined;
  const what = page.followsNow ? 'window ending at now' : 'a chosen window; back to a window ending at now';
  return html`<nav class="page-nav" aria-label="page window">${what}: ${links}${all ? html` · <a href="/">all assets and rollups</a>` : ''}</nav>`;
}
