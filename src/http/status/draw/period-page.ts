/**
 * The period page: why one period of a rollup is in its state, in sentences and tables, from the
 * same explanation `GET /v1/rollups/{id}/periods/{key}` answers (explainPeriod).
 */
import { periodOfKey } from '../../../core/periods/periods.js';
import type { Rollup } from '../../../core/rollups/rollup.js';
import type { PeriodExplanation, UpstreamExplanation } from '../load/model.js';
import { formatLength, formatPointText, formatRatio, formatWhen as when } from './format.js';
import { html, pageHref, type SafeHtml } from './html.js';
import { describePolicy } from './policy-text.js';
import { renderRunHistory, runReasons } from './run-views.js';
import { STATE_TEXT } from './state-text.js';

/** Missing and replay_required ranges listed per upstream on the page; the JSON lists up to 100. */
const RANGES_SHOWN = 20;
const SECOND = 1_000_000;

export function periodHref(rollupId: string, key: string): string {
  return `/rollups/${encodeURIComponent(rollupId)}/periods/${encodeURIComponent(key)}`;
}

/** A missing or replay_required range as the JSON gives it, for reading. */
function range(rollup: Rollup, r: { start: string | number; end: string | number }): string {
  if (rollup.domain === 'integer') return `${r.start} → ${r.end}`;
  const point = (v: string | number) => formatPointText('time', Date.parse(String(v)) * 1000);
  return `${point(r.start)} → ${point(r.end)} UTC`;
}

const amount = (rollup: Rollup, total: number) =>
  rollup.domain === 'time' ? formatLength('time', total * SECOND) : total.toLocaleString('en-US');

/** What each upstream lacks, one sentence each; nothing for an upstream that is complete. */
function upstreamReasons(rollup: Rollup, answer: PeriodExplanation): SafeHtml[] {
  return Object.entries(answer.upstreams).flatMap(([name, u]) => {
    const out: SafeHtml[] = [];
    const link = html`<a href="${pageHref({ asset: name })}">${name}</a>`;
    if (!u.seen) {
      out.push(
        html`<li class="bad" data-upstream="${name}">${link} has never been seen: the whole period is missing.</li>`,
      );
      return out;
    }
    if (u.missing_count > 0) {
      const first = u.missing.slice(0, 3).map((m) => range(rollup, m));
      const more = u.missing_count - first.length;
      out.push(
        html`<li class="bad" data-upstream="${name}">${link} misses ${amount(rollup, u.missing_total)} (${formatRatio(u.ratio)} complete): ${first.join(', ')}${more > 0 ? ` and ${more.toLocaleString('en-US')} more` : ''}.</li>`,
      );
    }
    if (u.replay_required_count > 0) {
      const r = u.replay_required[0]!;
      out.push(
        html`<li class="warn" data-upstream="${name}">${link} must be rebuilt: ${range(rollup, r)} is at version ${r.version ?? 'none'}, ${r.required_version} is required${u.replay_required_count > 1 ? ` (and ${u.replay_required_count - 1} more ranges)` : ''}.</li>`,
      );
    }
    return out;
  });
}

/** The verdict in sentences: state, what is missing, settle and deadline. */
function reasons(rollup: Rollup, answer: PeriodExplanation, nowMs: number): SafeHtml[] {
  const { period, verdict } = answer;
  const policy = rollup.policy;
  const out: SafeHtml[] = [];
  const satisfied =
    verdict.satisfied === 'full'
      ? 'every upstream is complete'
      : verdict.satisfied === 'partial'
        ? `the policy (${describePolicy(rollup)}) is met, though not every upstream is complete`
        : `the policy (${describePolicy(rollup)}) is not met`;
  // A decided period waits for nothing: "wait (triggered)" would read as if it were still waiting.
  const decided =
    verdict.outcome.startsWith('wait') && (period.state === 'triggered' || period.state === 'missed');
  out.push(
    decided
      ? html`<li>Now ${satisfied}; the period is <strong>${period.state === 'triggered' ? `triggered (generation ${period.generation})` : 'missed'}</strong> and nothing more is owed${rollup.rerun === 'never' ? '' : ` unless a ${rollup.rerun === 'on_update' ? 'newer completion' : 'replay requirement'} touches it (rerun: ${rollup.rerun})`}.</li>`
      : html`<li>Now ${satisfied}; the policy says: <strong>${verdict.outcome}</strong>.</li>`,
  );
  out.push(...upstreamReasons(rollup, answer));
  if (verdict.settle_remaining_seconds !== null && verdict.due_at !== null) {
    out.push(
      html`<li class="settle">Settle (${formatLength('time', policy.settleMs * 1000)} without new data) still runs ${formatLength('time', verdict.settle_remaining_seconds * SECOND)}: it triggers at ${when(verdict.due_at, nowMs)} unless new data arrives.</li>`,
    );
  }
  if (verdict.deadline_at !== null) {
    const passed = Date.parse(verdict.deadline_at) <= nowMs;
    const then = policy.onDeadline === 'miss' ? 'missed' : 'triggered with what is there';
    out.push(
      html`<li class="deadline">Deadline ${when(verdict.deadline_at, nowMs)}: ${passed ? 'passed' : `if still unsatisfied then, the period is ${then}`}.</li>`,
    );
  } else if (period.state === 'waiting' && rollup.domain === 'time') {
    out.push(html`<li class="deadline">No deadline: it waits until the policy is met.</li>`);
  }
  if (period.rerun !== null) {
    out.push(
      html`<li class="warn">A rerun is owed: upstream data was ${period.rerun === 'replay' ? 'reprocessed (replay)' : 'updated'} after generation ${period.generation} was triggered.</li>`,
    );
  }
  if (period.manual_requested) out.push(html`<li>A manual trigger was requested.</li>`);
  if (!period.stored) {
    out.push(
      html`<li>Nothing has happened to this period yet (no event touched it): its state is derived.</li>`,
    );
  }
  return out;
}

function upstreamRow(rollup: Rollup, name: string, u: UpstreamExplanation): SafeHtml {
  const missing = u.missing
    .slice(0, RANGES_SHOWN)
    .map((m) => html`<li data-start="${m.start}" data-end="${m.end}">${range(rollup, m)}</li>`);
  const replay = u.replay_required
    .slice(0, RANGES_SHOWN)
    .map(
      (r) =>
        html`<li data-start="${r.start}" data-end="${r.end}">${range(rollup, r)}: ${r.version ?? 'none'} → ${r.required_version}</li>`,
    );
  const list = (items: SafeHtml[], count: number) =>
    count === 0
      ? 'none'
      : html`<ol>${items}</ol>${count > items.length ? html`<span class="more">and ${(count - items.length).toLocaleString('en-US')} more</span>` : ''}`;
  return html`<tr data-upstream="${name}"><td><a href="${pageHref({ asset: name })}">${name}</a>${u.seen ? '' : html` <span class="bad">never seen</span>`}</td><td class="num ${u.ratio >= 1 ? 'ok' : 'bad'}">${formatRatio(u.ratio)}</td><td>${u.missing_count === 0 ? 'none' : html`${amount(rollup, u.missing_total)} in ${u.missing_count.toLocaleString('en-US')} ${u.missing_count === 1 ? 'range' : 'ranges'}${list(missing, u.missing_count)}`}</td><td>${list(replay, u.replay_required_count)}</td><td>${u.versions.length === 0 ? '—' : u.versions.join(', ')}</td></tr>`;
}

function triggerTable(answer: PeriodExplanation, nowMs: number): SafeHtml {
  if (answer.triggers.length === 0) return html`<p class="none">Never triggered.</p>`;
  const rows = answer.triggers.map((t) => {
    const delivery =
      t.delivered_at !== null
        ? html`<span class="ok">delivered ${when(t.delivered_at, nowMs)}</span>`
        : t.failed_at !== null
          ? html`<span class="bad">failed ${when(t.failed_at, nowMs)}</span>`
          : html`<span class="warn">pending</span>`;
    return html`<tr data-generation="${t.generation}"><td class="num">#${t.generation}</td><td>${t.reason}</td><td>${when(t.decided_at, nowMs)}</td><td>${delivery}</td><td class="num">${t.attempts}</td><td class="${t.last_error === null ? '' : 'bad'}">${t.last_error ?? ''}</td></tr>`;
  });
  return html`<table class="overview"><thead><tr><th>generation</th><th>reason</th><th>decided</th><th>delivery</th><th>attempts</th><th>last error</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** `ended 31m ago` or `ends in 29m`, for a time period ending at `end` (µs). */
function endedText(end: number, nowMs: number): string {
  const delta = end - nowMs * 1000;
  return delta > 0 ? `ends in ${formatLength('time', delta)}` : `ended ${formatLength('time', -delta)} ago`;
}

/** The page's body (the shell adds head, styles and refresh). */
export function renderPeriodBody(rollup: Rollup, answer: PeriodExplanation, nowMs: number): SafeHtml {
  const { period, runs } = answer;
  // The current run: the newest attempt of the period's generation (older generations are history).
  const current = runs.find((a) => a.generation === period.generation);
  const retryHint = `coverage-rollup retry ${rollup.id} --period ${period.key}`;
  const around = (point: number) => rollup.calendar.periodContaining(point);
  const here = periodOfKey(rollup, period.key)!;
  const previous = here.start > rollup.begin ? around(here.start - 1) : null;
  const next = rollup.domain === 'integer' || here.end <= nowMs * 1000 ? around(here.end) : null;
  const nav = html`<nav class="page-nav"><a href="${pageHref({ rollup: rollup.id })}">← rollup ${rollup.id}</a>${previous ? html` · <a href="${periodHref(rollup.id, previous.key)}" rel="prev">previous period ${previous.key}</a>` : ''}${next ? html` · <a href="${periodHref(rollup.id, next.key)}" rel="next">next period ${next.key}</a>` : ''} · <a href="/v1/rollups/${encodeURIComponent(rollup.id)}/periods/${encodeURIComponent(period.key)}">as JSON</a></nav>`;
  const upstreams = Object.entries(answer.upstreams).map(([name, u]) => upstreamRow(rollup, name, u));
  return html`${nav}
<section class="card period" data-rollup="${rollup.id}" data-key="${period.key}" data-state="${period.state}">
<header><h2>Period ${period.key} of ${rollup.id}</h2><span class="state-badge"><span class="sw s-${period.state}"></span> ${STATE_TEXT[period.state]}${period.generation > 0 ? ` · generation ${period.generation}` : ''}</span></header>
<p class="facts">${String(period.start)} → ${String(period.end)}${rollup.domain === 'time' ? html` (${endedText(here.end, nowMs)})` : ''} · upstream ratio ${formatRatio(period.ratio)} · policy ${describePolicy(rollup)} · rerun ${rollup.rerun}</p>
<h3>Why</h3><ul class="why">${reasons(rollup, answer, nowMs)}${runReasons(current, retryHint, nowMs)}</ul>
</section>
<section class="card"><h3>Upstreams</h3><table class="overview upstreams"><thead><tr><th>upstream</th><th>complete</th><th>missing</th><th>replay required</th><th>versions</th></tr></thead><tbody>${upstreams}</tbody></table></section>
<section class="card run-history"><h3>Run history</h3>${renderRunHistory(runs, nowMs)}</section>
<section class="card"><h3>Trigger history</h3>${triggerTable(answer, nowMs)}</section>`;
}
