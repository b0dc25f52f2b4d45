/**
 * Runs: the states of one attempt of a trigger, how a report moves them, and when a
 * failed attempt is retried. Pure: `now` and every time are epoch milliseconds from the caller.
 */

export const RUN_STATES = [
  'pending',
  'started',
  'running',
  'succeeded',
  'failed',
  'timed_out',
  'lost',
] as const;
export type RunState = (typeof RUN_STATES)[number];

/** The run states counted per rollup: all but succeeded, which is most of history. */
export const COUNTED_RUN_STATES = ['pending', 'started', 'running', 'failed', 'timed_out', 'lost'] as const;
export type CountedRunState = (typeof COUNTED_RUN_STATES)[number];

/** Not finished: the scheduler still delivers (pending) or follows (started, running) them. */
export const OPEN_STATES: readonly RunState[] = ['pending', 'started', 'running'];
/** Finished without success: retried under the rollup's policy while retries are left. */
export const UNSUCCESSFUL_STATES: readonly RunState[] = ['failed', 'timed_out', 'lost'];

export const isOpen = (state: RunState): boolean => OPEN_STATES.includes(state);
export const isFinished = (state: RunState): boolean => !isOpen(state);

export interface RunPolicy {
  /** Automatic retries per generation: attempts 1 .. retries + 1 are made without a hand. */
  readonly retries: number;
  /** The wait before the first retry; it doubles for each later one. */
  readonly backoffMs: number;
  /** No outcome this long after the target accepted the run: timed_out. */
  readonly timeoutMs: number;
}

export const DEFAULT_RUN_POLICY: RunPolicy = { retries: 2, backoffMs: 60_000, timeoutMs: 6 * 3_600_000 };

/** Retry delays grow exponentially and stop growing here (a day): 2^n overflows nothing useful. */
const MAX_DELAY_MS = 86_400_000;

/** The wait after attempt `attempt` finished unsuccessfully: backoff, 2 x backoff, 4 x backoff, ... */
export function retryDelayMs(policy: RunPolicy, attempt: number): number {
  return Math.min(MAX_DELAY_MS, policy.backoffMs * 2 ** Math.min(Math.max(attempt - 1, 0), 40));
}

/**
 * The id a target sees for one attempt: attempt 1 keeps the trigger's idempotency key (today's
 * jobId, Idempotency-Key and dag_run_id are unchanged), attempt N > 1 is `<key>~aN`.
 */
export function runId(idempotencyKey: string, attempt: number): string {
  return attempt <= 1 ? idempotencyKey : `${idempotencyKey}~a${attempt}`;
}

/** The idempotency key and attempt a run id names (the inverse of runId). */
export function parseRunId(id: string): { idempotencyKey: string; attempt: number } {
  const match = /^(.*)~a([1-9][0-9]{0,8})$/.exec(id);
  if (!match) return { idempotencyKey: id, attempt: 1 };
  return { idempotencyKey: match[1]!, attempt: Number(match[2]) };
}

/** What the scheduler stores of a run and reads back to move it. */
export interface RunFacts {
  readonly attempt: number;
  readonly state: RunState;
  readonly error: string | null;
  readonly version: string | null;
  readonly startedAt: number | null;
  readonly finishedAt: number | null;
  readonly timeoutAt: number | null;
  readonly nextRetryAt: number | null;
}

/** What can happen to a run: from the scheduler itself, a target poll, or the callback. */
export type RunReport =
  /** The target accepted the delivery. */
  | { readonly kind: 'delivered' }
  /** The target refused the delivery for good (a 4xx): the attempt failed. */
  | { readonly kind: 'refused'; readonly error: string }
  /** Checked by the scheduler: no outcome by `timeout_at`. */
  | { readonly kind: 'timeout' }
  /**
   * What the target says. `reopen`: a finished run that the target runs again (a dag run cleared in
   * Airflow) becomes running; without it a finished run never moves.
   */
  | {
      readonly kind: 'target';
      readonly state: 'running' | 'succeeded' | 'failed' | 'lost';
      readonly error?: string | null | undefined;
      readonly version?: string | null | undefined;
      readonly reopen?: boolean | undefined;
    };

/**
 * applied: the run moved; unchanged: it was so already; stale: it moved, but it is not its period's
 * current run (an older attempt or generation), so nothing else follows from it (no retry, no
 * period change); refused: a run does not move that way (a finished run, except a reopen).
 */
export type ReportEffect = 'applied' | 'unchanged' | 'stale' | 'refused';

export interface Transition {
  readonly effect: ReportEffect;
  readonly run: RunFacts;
}

export interface TransitionContext {
  /** The run is its period's current one: its generation's newest attempt, and the period's generation. */
  readonly current: boolean;
  readonly policy: RunPolicy;
  readonly now: number;
}

/** The state a report asks for, from the run's present state; null when the run does not move. */
function target(run: RunFacts, report: RunReport): RunState | null {
  switch (report.kind) {
    case 'delivered':
      return run.state === 'pending' ? 'started' : null;
    case 'refused':
      return run.state === 'pending' ? 'failed' : null;
    case 'timeout':
      return run.state === 'started' || run.state === 'running' ? 'timed_out' : null;
    case 'target':
      if (isFinished(run.state)) {
        if (report.state === 'running' && report.reopen) return 'running';
        // Lost says the outcome was missed, not that the run failed: a success learnt later (the
        // completion event of a job removed on completion, read after a check found it gone) wins.
        return run.state === 'lost' && report.state === 'succeeded' ? 'succeeded' : null;
      }
      return report.state;
  }
}

/**
 * How a report moves a run. A finished run never moves, except a reopen to running and a lost run
 * that turns out to have succeeded; an open run
 * takes any outcome (a callback may even arrive before the delivery was recorded). A current run
 * that finishes unsuccessfully gets `nextRetryAt` while the policy has retries left; a stale one
 * (not current) moves alone and schedules nothing.
 */
export function applyReport(run: RunFacts, report: RunReport, ctx: TransitionContext): Transition {
  const next = target(run, report);
  if (next === null) {
    const same =
      (report.kind === 'target' && report.state === run.state) ||
      (report.kind === 'delivered' && run.state !== 'pending') ||
      (report.kind === 'timeout' && run.state === 'timed_out');
    return { effect: same ? 'unchanged' : 'refused', run };
  }
  if (next === run.state) return { effect: 'unchanged', run };
  const { now, policy } = ctx;
  const reopened = isFinished(run.state);
  const startedAt = reopened ? now : (run.startedAt ?? now);
  const finished = isFinished(next);
  const error =
    report.kind === 'refused'
      ? report.error
      : report.kind === 'timeout'
        ? `no outcome within ${Math.round(policy.timeoutMs / 1000)} s of the start`
        : report.kind === 'target' && (next === 'failed' || next === 'lost')
          ? (report.error ?? (next === 'lost' ? 'the target no longer knows the run' : 'failed'))
          : null;
  const version = report.kind === 'target' && next === 'succeeded' ? (report.version ?? null) : run.version;
  const retry =
    ctx.current && UNSUCCESSFUL_STATES.includes(next) && run.attempt <= policy.retries
      ? now + retryDelayMs(policy, run.attempt)
      : null;
  return {
    effect: ctx.current ? 'applied' : 'stale',
    run: {
      attempt: run.attempt,
      state: next,
      error,
      version,
      // A refused delivery never started.
      startedAt: report.kind === 'refused' ? run.startedAt : startedAt,
      finishedAt: finished ? now : null,
      timeoutAt: finished
        ? run.timeoutAt
        : reopened || run.timeoutAt === null
          ? now + policy.timeoutMs
          : run.timeoutAt,
      nextRetryAt: retry,
    },
  };
}

/** Why a run cannot be retried by hand now, or null when it can (it finished without success). */
export function manualRetryRefusal(state: RunState | null): string | null {
  if (state === null) return 'the period has no run yet';
  if (UNSUCCESSFUL_STATES.includes(state)) return null;
  return isOpen(state) ? `its run is still ${state}` : 'its run succeeded';
}

/** A BullMQ job's state (Queue.getJobState) as a report; null while it has not started. */
export function queueJobReport(
  state: string,
  job: { readonly attemptsMade?: number; readonly failedReason?: string } | undefined,
): RunReport | null {
  switch (state) {
    case 'completed':
      return { kind: 'target', state: 'succeeded' };
    case 'failed':
      return { kind: 'target', state: 'failed', error: job?.failedReason || 'the job failed' };
    case 'active':
      return { kind: 'target', state: 'running' };
    case 'unknown':
      return { kind: 'target', state: 'lost', error: 'the job was removed before its outcome was seen' };
    case 'delayed':
      // The daemon adds no delay: a delayed job is between two of BullMQ's own attempts.
      return { kind: 'target', state: 'running' };
    default:
      // waiting, prioritized, waiting-children: accepted, not started; running once an attempt was made.
      return (job?.attemptsMade ?? 0) > 0 ? { kind: 'target', state: 'running' } : null;
  }
}

/** An Airflow dag run's state as a report: queued and running are running; a finished run going back reopens. */
export function airflowRunReport(state: string, note?: string | null): RunReport | null {
  switch (state) {
    case 'queued':
    case 'running':
      return { kind: 'target', state: 'running', reopen: true };
    case 'success':
      return { kind: 'target', state: 'succeeded' };
    case 'failed':
      return {
        kind: 'target',
        state: 'failed',
        error: note ? `dag run failed: ${note}` : 'the dag run failed',
      };
    default:
      return null;
  }
}
