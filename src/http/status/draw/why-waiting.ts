/**
 * Why a rollup's periods wait, from its upstreams' index rows alone (no period is read): which
 * upstreams no event has named yet, which have nothing complete, and which end behind the
 * rollup's newest ended period (time) or behind its furthest upstream (integer). Pure.
 */
import type { Rollup } from '../../../core/rollups/rollup.js';
import type { Domain } from '../../../core/types.js';
import { formatLength } from './format.js';
import { html, pageHref, type SafeHtml } from './html.js';

/** What the overview knows of one upstream: its index row's extent end, or nothing (never seen). */
export interface UpstreamEnd {
  readonly coveredHi: number | null;
}

export interface WhyWaiting {
  readonly unseen: readonly string[];
  readonly nothingComplete: readonly string[];
  /** Furthest behind first: how far (µs for time, positions for integer) each upstream lags. */
  readonly behind: ReadonlyArray<{ readonly name: string; readonly by: number }>;
}

/** Names listed per reason; the rest are counted, so a row stays short at 100 upstreams. */
const NAMED = 2;

export function whyWaiting(
  rollup: Rollup,
  ends: ReadonlyMap<string, UpstreamEnd>,
  nowUs: number,
): WhyWaiting {
  const unseen: string[] = [];
  const nothingComplete: string[] = [];
  const covered: { name: string; hi: number }[] = [];
  for (const name of rollup.upstream) {
    const end = ends.get(name);
    if (end === undefined) unseen.push(name);
    else if (end.coveredHi === null) nothingComplete.push(name);
    else covered.push({ name, hi: end.coveredHi });
  }
  // Time: an upstream is behind when it ends before the current period, the one that cannot be
  // complete yet; it lags from now. Integer: behind the furthest upstream, by the difference.
  const time = rollup.domain === 'time';
  const mark = time
    ? Math.max(rollup.calendar.periodContaining(nowUs).start, rollup.begin)
    : Math.max(...covered.map((c) => c.hi));
  const behind = covered
    .filter((c) => c.hi < mark)
    .map((c) => ({ name: c.name, by: (time ? nowUs : mark) - c.hi }))
    .sort((a, b) => b.by - a.by || (a.name < b.name ? -1 : 1));
  return { unseen, nothingComplete, behind };
}

/** `2 upstreams never seen: a0, a1 · behind: a2 2h`, names linked to their pages. */
export function renderWhyWaiting(why: WhyWaiting, domain: Domain): SafeHtml {
  const parts: SafeHtml[] = [];
  if (why.unseen.length > 0) {
    const n = why.unseen.length;
    parts.push(
      html`<span class="bad" data-why="unseen">${n === 1 ? 'upstream' : `${n} upstreams`} never seen: ${names(why.unseen)}</span>`,
    );
  }
  if (why.nothingComplete.length > 0) {
    parts.push(
      html`<span class="warn" data-why="nothing-complete">nothing complete: ${names(why.nothingComplete)}</span>`,
    );
  }
  if (why.behind.length > 0) {
    const shown = why.behind
      .slice(0, NAMED)
      .map(
        (b, i) =>
          html`${i > 0 ? ', ' : ''}<a href="${pageHref({ asset: b.name })}">${b.name}</a> ${formatLength(domain, b.by)}`,
      );
    parts.push(html`<span class="warn" data-why="behind">behind: ${shown}${more(why.behind.length)}</span>`);
  }
  if (parts.length === 0) return html`<span class="more" data-why="current">upstreams current</span>`;
  return html`${parts.map((p, i) => html`${i > 0 ? ' · ' : ''}${p}`)}`;
}

function names(list: readonly string[]): SafeHtml {
  const shown = list
    .slice(0, NAMED)
    .map((name, i) => html`${i > 0 ? ', ' : ''}<a href="${pageHref({ asset: name })}">${name}</a>`);
  return html`${shown}${more(list.length)}`;
}

const more = (n: number) => (n > NAMED ? ` +${(n - NAMED).toLocaleString('en-US')} more` : '');
