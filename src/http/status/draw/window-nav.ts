/** The links that move the status page's window: presets, zoom and pan, for a card or the page. */
import type { Domain, Interval } from '../../../core/types.js';
import type { PageView } from '../load/model.js';
import { html, pageHref, type SafeHtml } from './html.js';
import { boundParam, nextPreset, PRESETS, type PresetName, pan, zoom } from './window.js';

type Focus = { asset?: string; rollup?: string };

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
