/**
 * Open repairs on the status page: per asset, its open and partial repair requests,
 * the oldest first, with when it was asked, how much is still missing and the first ranges of its
 * oldest request. Bounded: at most a page's worth of assets, the rest counted.
 */
import type { OpenRepairsView } from '../load/model.js';
import { formatLength, formatPointText, formatWhen } from './format.js';
import { html, pageHref, type SafeHtml } from './html.js';

/** Assets listed in the open repairs table; the rest are counted. */
export const REPAIRS_LISTED = 20;
/** Ranges of an asset's oldest request shown in its row. */
const RANGES_SHOWN = 3;

const second = (d: Date) => new Date(Math.round(d.getTime() / 1000) * 1000).toISOString();

/** The table of open repairs per asset; nothing when no request is open. */
export function renderOpenRepairs(view: OpenRepairsView, nowMs: number): SafeHtml | string {
  if (view.assets === 0) return '';
  const rows = view.rows.map((r) => {
    const ranges = r.first
      .slice(0, RANGES_SHOWN)
      .map(
        (g, i) =>
          html`${i > 0 ? ', ' : ''}<span data-kind="${g.kind}">${formatPointText(r.domain, g.start)} → ${formatPointText(r.domain, g.end)}${g.kind === 'replay_required' ? ` (rebuild at ${g.requiredVersion ?? ''})` : ''}</span>`,
      );
    const more = r.ranges - Math.min(RANGES_SHOWN, r.first.length);
    const api = `/v1/repairs?asset=${encodeURIComponent(r.asset)}`;
    return html`<tr data-asset="${r.asset}" data-open="${r.open}" data-partial="${r.partial}"><td><a href="${pageHref({ asset: r.asset })}">${r.asset}</a></td><td class="num">${r.open}</td><td class="num">${r.partial}</td><td title="${second(r.oldest)}">${formatWhen(second(r.oldest), nowMs)}</td><td class="num">${r.ranges.toLocaleString('en-US')}</td><td class="num">${formatLength(r.domain, r.missing)}</td><td class="ranges">${ranges}${more > 0 ? html` <span class="more">and ${more.toLocaleString('en-US')} more</span>` : ''}</td><td><a href="${api}">requests</a></td></tr>`;
  });
  const more = view.assets - view.rows.length;
  return html`<h2 id="open-repairs">Open repairs <span class="more">${view.requests.toLocaleString('en-US')} ${view.requests === 1 ? 'request' : 'requests'} open or partly covered on ${view.assets.toLocaleString('en-US')} ${view.assets === 1 ? 'asset' : 'assets'} · the oldest first</span></h2>
<div class="scroll"><table class="overview open-repairs"><thead><tr><th>asset</th><th class="num">open</th><th class="num">partial</th><th>oldest requested</th><th class="num">ranges</th><th class="num">missing</th><th>first ranges of the oldest</th><th></th></tr></thead><tbody>${rows}</tbody></table></div>${more > 0 ? html`<p class="more">and ${more.toLocaleString('en-US')} more ${more === 1 ? 'asset' : 'assets'}; filter by name or see <a href="/v1/repairs?state=open">/v1/repairs</a></p>` : ''}`;
}
