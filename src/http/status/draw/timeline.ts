/** Inline SVG for one timeline: a bar of drawn items over a window, with a dated axis. */
import type { Domain, Interval } from '../../../core/types.js';
import { ticks } from './format.js';
import { type HtmlValue, html, type SafeHtml } from './html.js';
import type { DrawItem } from './pixels.js';
import { boundParam } from './window.js';

/** Width of the plot in SVG user units; the drawing merges anything narrower than one of them. */
export const PLOT_WIDTH = 1000;
const MARGIN = 48;
const BAR_Y = 4;
const BAR_HEIGHT = 26;
const MARK_HEIGHT = 9;
const AXIS_Y = BAR_Y + BAR_HEIGHT;
const HEIGHT = AXIS_Y + 36;
const MAX_TICKS = 8;

export interface TrackOptions<D> {
  /** What the strip shows, for screen readers, e.g. "coverage of warehouse.orders". */
  readonly label: string;
  readonly kind: 'coverage' | 'periods';
  readonly domain: Domain;
  readonly window: Interval;
  readonly items: readonly DrawItem<D>[];
  /** Tooltip text of an item. */
  readonly describe: (item: DrawItem<D>) => string;
  /** Extra data-* attributes of an item (names without the prefix). */
  readonly data?: (item: DrawItem<D>) => Record<string, string | number | undefined>;
  /** Short text drawn inside an item when it is wide enough (e.g. a generation). */
  readonly text?: (item: DrawItem<D>) => string | undefined;
  /** Where "now" is, drawn as a marker when inside the window (its end included). */
  readonly now?: number | undefined;
  /** The complete share (0 to 1) of an item drawn alone, shaded from the bottom when partial. */
  readonly fill?: (item: DrawItem<D>) => number | undefined;
  /** Where clicking an item leads (e.g. its period page). */
  readonly href?: (item: DrawItem<D>) => string | undefined;
}

const fixed = (n: number) => (Math.round(n * 100) / 100).toString();

export function renderTrack<D>(options: TrackOptions<D>): SafeHtml {
  const { window, domain } = options;
  const scale = PLOT_WIDTH / (window.end - window.start);
  const xOf = (point: number) => (point - window.start) * scale;
  const total = PLOT_WIDTH + 2 * MARGIN;
  const rects = options.items.map((item) => {
    const extra = Object.entries(options.data?.(item) ?? {}).map(([name, value]) =>
      value === undefined ? '' : html` data-${name}="${value}"`,
    );
    const x = fixed(item.x);
    const width = fixed(item.width);
    const data = html`data-state="${item.state}" data-major="${item.major}" data-start="${boundParam(domain, item.start)}" data-end="${boundParam(domain, item.end)}" data-count="${item.count}"${extra}`;
    const title = html`<title>${options.describe(item)}</title>`;
    if (item.major === item.state) {
      const ratio = options.fill?.(item);
      // A partial period: its complete share rises from the bottom, so 75 % never looks like 0 %.
      const shade =
        ratio !== undefined && ratio > 0 && ratio < 1
          ? html`<rect class="fill" x="${x}" y="${fixed(BAR_Y + BAR_HEIGHT * (1 - ratio))}" width="${width}" height="${fixed(BAR_HEIGHT * ratio)}" data-ratio="${ratio}">${title}</rect>`
          : '';
      const drawn = html`<rect class="s-${item.state}" x="${x}" y="${BAR_Y}" width="${width}" height="${BAR_HEIGHT}" ${data}${ratio === undefined ? '' : html` data-ratio="${ratio}"`}>${title}</rect>${shade}`;
      const href = options.href?.(item);
      return href === undefined ? drawn : html`<a href="${href}">${drawn}</a>`;
    }
    // Mostly one state with some of a more severe one: the main state, marked on top.
    return html`<g class="mixed">${title}<rect class="s-${item.major} under" x="${x}" y="${BAR_Y}" width="${width}" height="${BAR_HEIGHT}"/><rect class="s-${item.state} mark" x="${x}" y="${BAR_Y}" width="${width}" height="${MARK_HEIGHT}" ${data}/></g>`;
  });
  const labels: HtmlValue[] = [];
  for (const item of options.items) {
    const text = options.text?.(item);
    if (text === undefined || item.width < 8 * text.length + 6) continue;
    labels.push(
      html`<text class="bar-text" x="${fixed(item.x + item.width / 2)}" y="${BAR_Y + BAR_HEIGHT / 2 + 4}" text-anchor="middle">${text}</text>`,
    );
  }
  const marks = ticks(domain, window, MAX_TICKS);
  // Grid lines go under the drawn items: they show through only where nothing is drawn.
  const grid = marks.map((tick) => {
    const x = fixed(xOf(tick.at));
    return html`<line class="grid" x1="${x}" x2="${x}" y1="${BAR_Y}" y2="${AXIS_Y}"/>`;
  });
  const axis = marks.map((tick) => {
    const x = fixed(xOf(tick.at));
    return html`<line class="tick" x1="${x}" x2="${x}" y1="${AXIS_Y}" y2="${AXIS_Y + 5}"/><text class="tick-label" x="${x}" y="${AXIS_Y + 17}" text-anchor="middle">${tick.label}</text>${
      tick.sub === undefined
        ? ''
        : html`<text class="tick-sub" x="${x}" y="${AXIS_Y + 30}" text-anchor="middle">${tick.sub}</text>`
    }`;
  });
  const now = options.now;
  const nowMarker =
    now !== undefined && now > window.start && now <= window.end
      ? html`<line class="now" data-role="now" x1="${fixed(xOf(now))}" x2="${fixed(xOf(now))}" y1="0" y2="${AXIS_Y + 2}"><title>now</title></line>`
      : '';
  return html`<svg class="track track-${options.kind}" viewBox="0 0 ${total} ${HEIGHT}" width="${total}" height="${HEIGHT}" role="img" aria-label="${options.label}" data-window-start="${boundParam(domain, window.start)}" data-window-end="${boundParam(domain, window.end)}"><g transform="translate(${MARGIN} 0)"><rect class="plot" data-role="plot" x="0" y="${BAR_Y}" width="${PLOT_WIDTH}" height="${BAR_HEIGHT}"/>${grid}${rects}${labels}<line class="axis" x1="0" x2="${PLOT_WIDTH}" y1="${AXIS_Y}" y2="${AXIS_Y}"/>${axis}${nowMarker}</g></svg>`;
}
