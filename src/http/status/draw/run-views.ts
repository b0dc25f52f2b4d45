/**
 * The runs on the status page: the periods whose run failed, timed out or was lost, at
 * the top of the overview with their error and attempt; and a period's run history, attempt by
 * attempt, with a sentence that says what happens next.
 */
import { type FailedRunsView, MAX_RUNS, type RunReportView, type RunView } from '../load/model.js';
import { formatLength, formatWhen } from './format.js';
import { html, pageHref, type SafeHtml } from './html.js';
import { RUN_STATE_MEANING, RUN_STATE_TEXT, RUN_TONE, runBadge } from './run-text.js';

/** Error text shown in a table cell; the full text is in its title and on the period page. */
const ERROR_SHOWN = 160;

const iso = (d: Date) => d.toISOString();
/** formatWhen to the second: run times carry milliseconds nobody reads on a status page. */
const when = (text: string, nowMs: number) =>
  formatWhen(new Date(Math.round(Date.parse(text) / 1000) * 1000).toISOString(), nowMs);
const shortError = (error: string | null) =>
  error === null ? '' : error.length > ERROR_SHOWN ? `${error.slice(0, ERROR_SHOWN - 1)}…` : error;

/** `retry in 2m` or `no retry left`: whether a run that failed will be retried without a hand. */
function nextStep(nextRetryAt: Date | null, nowMs: number): SafeHtml {
  if (nextRetryAt === null) return html`<span class="bad">no retry left</span>`;
  const delta = nextRetryAt.getTime() - nowMs;
  const soon = delta > 1000 ? `in ${formatLength('time', delta * 1000)}` : 'now';
  return html`<span class="warn" title="${when(iso(nextRetryAt), nowMs)}">retry ${soon}</span>`;
}

/** The overview's first table: failed, timed-out and lost runs, newest first; nothing when none. */
export function renderFailedRuns(view: FailedRunsView, nowMs: number): SafeHtml | string {
  if (view.total === 0) return '';
  const rows = view.rows.map(
    (r) =>
      html`<tr data-rollup="${r.rollupId}" data-key="${r.key}" data-run-state="${r.state}"><td><a href="${pageHref({ rollup: r.rollupId })}">${r.rollupId}</a></td><td><a href="${r.href}">${r.key}</a></td><td>${runBadge(r.state)}</td><td class="num">#${r.generation} attempt ${r.attempt}</td><td class="error${r.error === null ? '' : ' has-error'}" title="${r.error ?? ''}">${shortError(r.error)}</td><td>${r.finishedAt === null ? '—' : when(iso(r.finishedAt), nowMs)}</td><td>${nextStep(r.nextRetryAt, nowMs)}</td></tr>`,
  );
  const more = view.total - view.rows.length;
  return html`<h2 id="failed-runs">Failed runs <span class="more">${view.total.toLocaleString('en-US')} ${view.total === 1 ? 'period whose run' : 'periods whose run'} failed, timed out or was lost · newest first</span></h2>
<div class="scroll"><table class="overview runs failed-runs"><thead><tr><th>rollup</th><th>period</th><th>run</th><th>attempt</th><th>error</th><th>ended</th><th>next</th></tr></thead><tbody>${rows}</tbody></table></div>${more > 0 ? html`<p class="more">and ${more.toLocaleString('en-US')} more; focus a rollup to see its periods</p>` : ''}`;
}

/** A period's attempts as the page gets them: newest first, each with its reports in order. */
export type RunHistory = ReadonlyArray<RunView & { readonly reports: readonly RunReportView[] }>;

/** Sentences for the period page's "Why": what the current run is, and what happens next. */
export function runReasons(current: RunView | undefined, retryHint: string, nowMs: number): SafeHtml[] {
  if (current === undefined) return [];
  const r = current;
  const which = `Run attempt ${r.attempt} of generation ${r.generation}`;
  const tone = RUN_TONE[r.state];
  const since =
    r.finished_at !== null
      ? ` ${when(r.finished_at, nowMs)}`
      : r.started_at !== null
        ? `, started ${when(r.started_at, nowMs)}`
        : '';
  const out: SafeHtml[] = [
    html`<li class="${tone}" data-run-state="${r.state}">${which} ${r.state === 'pending' ? 'is' : 'has'} ${RUN_STATE_TEXT[r.state]}${since}: ${RUN_STATE_MEANING[r.state]}${r.error !== null ? html` (<span class="error">${r.error}</span>)` : ''}.</li>`,
  ];
  if (tone === 'bad') {
    out.push(
      r.next_retry_at !== null
        ? html`<li class="warn" data-next-retry="${r.next_retry_at}">Attempt ${r.attempt + 1} will be made ${when(r.next_retry_at, nowMs)} (the rollup's run.retries and run.backoff).</li>`
        : html`<li class="bad">No retry is left under the rollup's run policy: retry by hand with <code>${retryHint}</code>.</li>`,
    );
  }
  if (r.state === 'started' || r.state === 'running') {
    if (r.timeout_at !== null)
      out.push(html`<li>Without an outcome by ${when(r.timeout_at, nowMs)} it times out.</li>`);
  }
  return out;
}

/** What each report did to its run, in words. */
const EFFECT_TEXT: Record<string, string> = {
  applied: 'moved the run',
  unchanged: 'no change',
  stale: 'an older attempt or generation: recorded only',
  refused: 'refused: a finished run does not move that way',
};

/**
 * An instant in a table cell that wraps only between its date, its time and how long ago it was,
 * never inside them (a narrow column otherwise breaks 2026-12-07 at its hyphens).
 */
function whenCell(text: string | null, nowMs: number): SafeHtml | string {
  if (text === null) return '—';
  const [date, time, ...rest] = when(text, nowMs).split(' ');
  return html`<span class="nw">${date}</span> <span class="nw">${time} ${rest[0] ?? ''}</span> <span class="nw">${rest.slice(1).join(' ')}</span>`;
}

/** A run id that may wrap after its rollup id and before its generation, and nowhere else if it fits. */
function runIdCell(runId: string): SafeHtml {
  const at = runId.lastIndexOf('@');
  if (at < 0) return html`${runId}`;
  return html`${runId.slice(0, at + 1)}<wbr>${runId.slice(at + 1)}`;
}

/**
 * Every attempt of the period, newest first: state, times, error and next retry, and its reports.
 * Each cell carries its column's name (data-label): on a narrow screen the rows stack as cards.
 */
export function renderRunHistory(history: RunHistory, nowMs: number): SafeHtml {
  if (history.length === 0) return html`<p class="none">No run yet: the period has not been triggered.</p>`;
  const at = (iso: string | null) => whenCell(iso, nowMs);
  const took = (a: RunView) =>
    a.started_at !== null && a.finished_at !== null
      ? formatLength('time', Math.max(0, Date.parse(a.finished_at) - Date.parse(a.started_at)) * 1000)
      : '';
  const reports = (a: RunHistory[number]) =>
    a.reports.length === 0
      ? ''
      : html`<details class="reports"><summary>${a.reports.length} ${a.reports.length === 1 ? 'report' : 'reports'}</summary><ol>${a.reports.map(
          (p) =>
            html`<li data-effect="${p.effect}">${when(p.at, nowMs)} · ${p.source}: ${p.state}${p.error !== null ? ` (${p.error})` : ''} · ${EFFECT_TEXT[p.effect] ?? p.effect}</li>`,
        )}</ol></details>`;
  const rows = history.map(
    (a) =>
      html`<tr data-generation="${a.generation}" data-attempt="${a.attempt}" data-run-state="${a.state}"><td class="num" data-label="generation">#${a.generation}</td><td class="num" data-label="attempt">${a.attempt}</td><td data-label="cause">${a.cause}</td><td data-label="state">${runBadge(a.state)}</td><td data-label="started" title="${a.created_at === null ? '' : `created ${when(a.created_at, nowMs)}`}">${at(a.started_at)}</td><td data-label="ended">${at(a.finished_at)}</td><td class="num" data-label="took">${took(a)}</td><td class="error ${RUN_TONE[a.state]}${a.error === null ? '' : ' has-error'}" data-label="error and reports">${a.error ?? ''}${a.version !== null ? html` <span class="ver">version ${a.version}</span>` : ''}${reports(a)}</td><td data-label="next retry">${a.next_retry_at === null ? '' : at(a.next_retry_at)}</td><td class="id" data-label="run id">${runIdCell(a.run_id)}${a.deliveries > 1 ? html` <span class="more">(${a.deliveries} deliveries)</span>` : ''}</td></tr>`,
  );
  const capped = history.length >= MAX_RUNS;
  return html`<table class="overview runs run-history"><thead><tr><th>generation</th><th>attempt</th><th>cause</th><th>state</th><th title="hover a start for when the attempt was made">started</th><th>ended</th><th>took</th><th>error and reports</th><th>next retry</th><th>run id</th></tr></thead><tbody>${rows}</tbody></table>${capped ? html`<p class="more">the newest ${MAX_RUNS} attempts; older ones are in the database</p>` : ''}`;
}
