/**
 * How the status page names and colours run states. Keyed by RunState, so a new state
 * is a compile error here until it has a label, a colour and a tone.
 */
import type { RunState } from '../../../core/runs.js';
import { html, type SafeHtml } from './html.js';

export const RUN_STATE_TEXT: Record<RunState, string> = {
  pending: 'pending delivery',
  started: 'started',
  running: 'running',
  succeeded: 'succeeded',
  failed: 'failed',
  timed_out: 'timed out',
  lost: 'lost',
};

/** Badge colours: open runs in blues, success green, the three failures in the page's alarm colours. */
export const RUN_COLOURS: Record<RunState, string> = {
  pending: '#8a94a3',
  started: '#5aa9d6',
  running: '#2563c9',
  succeeded: '#1e7b43',
  failed: '#b3261e',
  timed_out: '#b86e00',
  lost: '#6b1d2a',
};

/** The text class of each state in sentences and tables. */
export const RUN_TONE: Record<RunState, '' | 'ok' | 'warn' | 'bad'> = {
  pending: '',
  started: '',
  running: '',
  succeeded: 'ok',
  failed: 'bad',
  timed_out: 'bad',
  lost: 'bad',
};

/** What each unsuccessful end means, for the period page. */
export const RUN_STATE_MEANING: Record<RunState, string> = {
  pending: 'decided, not yet accepted by the target',
  started: 'the target accepted it; no outcome yet',
  running: 'the target says it is running',
  succeeded: 'the target reported success',
  failed: 'the target reported a failure',
  timed_out: 'no outcome came within run.timeout of its start',
  lost: 'the target no longer knows the run (its job or dag run was removed before an outcome was seen)',
};

/** A coloured badge, e.g. `failed`, with the state in a data attribute for tests and scripts. */
export function runBadge(state: RunState): SafeHtml {
  return html`<span class="run-badge r-${state}" data-run-state="${state}">${RUN_STATE_TEXT[state]}</span>`;
}

/** CSS for the badges, one rule per state. */
export function runCss(): string {
  return Object.entries(RUN_COLOURS)
    .map(([state, colour]) => `.r-${state} { background: ${colour}; }`)
    .join('\n');
}
