/**
 * The line at the top of each card: facts that no window changes (freshness, holes since the
 * first event, periods owed or late), coloured by severity.
 */

import { type AssetView, HISTORY_MAX_SEGMENTS, type RollupView } from '../load/model.js';
import { formatLength, formatPointText, formatRatio } from './format.js';
import { html, type SafeHtml } from './html.js';
import { STATE_TEXT } from './state-text.js';

const SECOND = 1_000_000;

export const plural = (n: number, one: string, many: string) =>
  `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/**
 * Facts that no window changes, coloured by severity: stale or fresh against max_lag, the lag
 * (time) or the last event (integer), and the holes since the first event.
 */
export function assetHeadline(view: AssetView): SafeHtml {
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
  if (gaps === null) {
    holes.push(
      html`<span class="holes" title="more than ${HISTORY_MAX_SEGMENTS.toLocaleString('en-US')} segments: see the gaps of each window">holes counted per window</span>`,
    );
  }
  if (gaps !== null && gaps > 0) {
    holes.push(html`<span class="holes bad">${plural(gaps, 'gap', 'gaps')} since the first event</span>`);
  }
  if (replayRequired !== null && replayRequired > 0) {
    holes.push(html`<span class="holes warn">${plural(replayRequired, 'range', 'ranges')} to replay</span>`);
  }
  if (gaps === 0 && replayRequired === 0 && f.covered_until !== null) {
    holes.push(html`<span class="holes ok">no holes since the first event</span>`);
  }
  return html`<span class="headline">${verdict} ${lag}${holes.map((h) => html` · ${h}`)}</span>`;
}

/**
 * Period counts over the rollup's whole history (no window changes them), worst first and
 * coloured by severity, and the newest period with how much of it is there.
 */
export function rollupHeadline(view: RollupView): SafeHtml {
  const t = view.totals;
  const parts: SafeHtml[] = [];
  if (view.failedRuns > 0) {
    parts.push(
      html`<span class="bad" data-count="failed_runs">${plural(view.failedRuns, 'failed run', 'failed runs')}</span>`,
    );
  }
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
    const n = view.lateWaiting;
    const late =
      view.domain === 'time' ? `waiting past ${n === 1 ? 'its' : 'their'} end` : 'waiting behind the newest';
    parts.push(html`<span class="warn" data-count="late">${plural(n, 'period', 'periods')} ${late}</span>`);
  }
  if (parts.length === 0)
    parts.push(html`<span class="ok">no failed run, nothing missed, owed or late</span>`);
  if (t.settling > 0) parts.push(html`<span>${t.settling.toLocaleString('en-US')} settling</span>`);
  const c = view.current;
  const current =
    c === null
      ? ''
      : html` · ${view.domain === 'time' ? 'current' : 'newest'} period <a href="${c.href}">${c.key}</a> ${STATE_TEXT[c.state]}${c.state === 'waiting' ? ` (${formatRatio(c.ratio)})` : ''}`;
  return html`<span class="headline">${parts.map((p, i) => html`${i > 0 ? ' · ' : ''}${p}`)}${current}</span>`;
}
