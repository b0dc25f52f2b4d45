/**
 * The overview of a large installation: one row per asset and rollup instead of a card with a
 * timeline, so a page of 50 of each stays a few dozen kilobytes at 10,000 assets and 1,000
 * rollups. Names link to the focused pages, which draw the timelines.
 */

import { PERIOD_STATES } from '../../../core/periods/policy.js';
import type { OverviewAsset, OverviewRollup } from '../load/model.js';
import { formatLength, formatPointText } from './format.js';
import { html, pageHref, type SafeHtml } from './html.js';
import { renderWhyWaiting } from './why-waiting.js';

export function renderOverviewAssets(assets: readonly OverviewAsset[]): SafeHtml {
  if (assets.length === 0) return html`<p class="none">No assets to show.</p>`;
  const rows = assets.map((a) => {
    const f = a.freshness;
    const until = a.coveredUntil === null ? '—' : formatPointText(a.domain, a.coveredUntil);
    const lag = f.lag_seconds === null ? '' : formatLength('time', f.lag_seconds * 1_000_000);
    const verdict =
      f.stale === true
        ? html`<span class="badge bad" title="${f.stale_reason ?? ''}">stale</span>`
        : f.stale === false
          ? html`<span class="badge ok">fresh</span>`
          : '';
    return html`<tr data-asset="${a.name}" data-stale="${f.stale === null ? 'unknown' : String(f.stale)}"><td><a href="${pageHref({ asset: a.name })}">${a.name}</a></td><td>${verdict}</td><td>${a.domain}</td><td>${until}</td><td class="num ${f.stale ? 'bad' : ''}">${lag}</td><td class="num">${a.segment_count.toLocaleString('en-US')}</td><td class="num">${a.event_count.toLocaleString('en-US')}</td></tr>`;
  });
  return html`<div class="scroll"><table class="overview"><thead><tr><th>asset</th><th>freshness</th><th>domain</th><th>covered until</th><th class="num">behind now</th><th class="num">segments</th><th class="num">events</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

export function renderOverviewRollups(rollups: readonly OverviewRollup[]): SafeHtml {
  if (rollups.length === 0) return html`<p class="none">No rollups to show.</p>`;
  const rows = rollups.map(
    (r) =>
      html`<tr data-rollup="${r.id}"><td><a href="${pageHref({ rollup: r.id })}">${r.id}</a></td><td>${r.source}</td><td>${r.every}</td><td class="num">${r.upstreams}</td><td class="num">${r.failedRuns > 0 ? html`<span class="bad">${r.failedRuns.toLocaleString('en-US')}</span>` : ''}</td>${PERIOD_STATES.map((s) => html`<td class="num">${r.counts[s] > 0 ? html`<span class="sw s-${s}"></span> ${r.counts[s].toLocaleString('en-US')}` : ''}</td>`)}<td class="why">${r.counts.waiting + r.counts.missed > 0 ? renderWhyWaiting(r.why, r.domain) : ''}</td></tr>`,
  );
  return html`<div class="scroll"><table class="overview"><thead><tr><th>rollup</th><th>from</th><th>every</th><th class="num">upstreams</th><th class="num">failed runs</th>${PERIOD_STATES.map((s) => html`<th class="num">${s.replace('_', ' ')}</th>`)}<th>why waiting</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}
