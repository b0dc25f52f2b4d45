import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { isFinished, isOpen, type RunFacts, type RunState } from '../core/runs.js';

/**
 * The run metrics: outcomes by target type and state, run durations, runs given up on,
 * and the open runs at scrape time.
 *
 * No `rollup` (nor period) label on any of them. At 1,000 rollups a per-rollup label multiplies
 * every series by 1,000: the histogram alone (4 targets × 4 outcomes × 20 buckets) would become
 * 320,000 series per instance, more than a Prometheus server should take from one job. Which
 * rollup and which periods failed is what the API (`run_state=`, the failed counts of
 * GET /v1/rollups) and the status page answer; the metrics say how many and how long. Every label
 * set is closed (target type × state) and starts at 0, so `increase()` and alerts see the first run.
 */

export const RUN_TARGET_TYPES = ['queue', 'webhook', 'airflow', 'dagster'] as const;
export type RunTargetType = (typeof RUN_TARGET_TYPES)[number];
/** The states a run ends in. */
export const RUN_OUTCOMES = [
  'succeeded',
  'failed',
  'timed_out',
  'lost',
] as const satisfies readonly RunState[];
export type RunOutcome = (typeof RUN_OUTCOMES)[number];
/** The states of a run still waiting for its outcome. */
export const OPEN_RUN_STATES = ['pending', 'started', 'running'] as const satisfies readonly RunState[];
export type OpenRunState = (typeof OPEN_RUN_STATES)[number];

/** What reportRun (and recordDelivery) answer, as far as the metrics need it. */
export interface ReportedRun {
  readonly effect: 'applied' | 'unchanged' | 'stale' | 'refused';
  /** The run is its period's current one: only then can it be given up on. */
  readonly current: boolean;
  readonly before: Pick<RunFacts, 'state'>;
  readonly after: Pick<RunFacts, 'state' | 'startedAt' | 'finishedAt' | 'nextRetryAt'>;
}

/**
 * Counts open runs by target type and state when /metrics is scraped (one grouped count); null
 * when the count could not be had in time, and the gauge keeps its last values.
 */
export type OpenRunSource = () => Promise<ReadonlyArray<{
  readonly target: RunTargetType;
  readonly state: OpenRunState;
  readonly count: number;
}> | null>;

/** One run's end, as the runs core records it. */
export interface RunEnd {
  readonly target: RunTargetType;
  readonly state: RunOutcome;
  /** Seconds from the target accepting the run to its outcome; null when it never started. */
  readonly seconds: number | null;
  /** True when no retry follows (the period stays failed until a manual retry or a rerun). */
  readonly final: boolean;
}

export function createRunMetrics(registry: Registry) {
  let openSource: OpenRunSource | undefined;
  const registers = [registry];
  const runs = new Counter({
    name: 'coverage_rollup_runs_total',
    help: 'Run attempts that ended, by target type and state (succeeded, failed, timed_out, lost); a failed attempt that will be retried counts here too',
    labelNames: ['target', 'state'] as const,
    registers,
  });
  const runsGivenUp = new Counter({
    name: 'coverage_rollup_runs_given_up_total',
    help: 'Runs that ended failed, timed_out or lost with no retry left, by target type and state: alert on this, not on runs_total',
    labelNames: ['target', 'state'] as const,
    registers,
  });
  const runSeconds = new Histogram({
    name: 'coverage_rollup_run_duration_seconds',
    help: 'From the target accepting a run to its outcome, by target type and state',
    labelNames: ['target', 'state'] as const,
    // Seconds-long jobs up to the PT6H default timeout and a day: each decade has two or three buckets.
    buckets: [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 21600, 43200, 86400],
    registers,
  });
  const runsOpen = new Gauge({
    name: 'coverage_rollup_runs_open',
    help: 'Runs waiting for their outcome (pending, started, running), by target type and state (read at scrape time)',
    labelNames: ['target', 'state'] as const,
    registers,
    async collect() {
      if (!openSource) return;
      const counts = await openSource();
      if (counts === null) return;
      for (const target of RUN_TARGET_TYPES)
        for (const state of OPEN_RUN_STATES) this.set({ target, state }, 0);
      for (const c of counts) this.set({ target: c.target, state: c.state }, c.count);
    },
  });
  /** Records one run's end: a call at each terminal transition, after its commit. */
  const runEnded = (end: RunEnd) => {
    const labels = { target: end.target, state: end.state };
    runs.inc(labels);
    if (end.seconds !== null) runSeconds.observe(labels, Math.max(0, end.seconds));
    if (end.final && end.state !== 'succeeded') runsGivenUp.inc(labels);
  };
  for (const target of RUN_TARGET_TYPES) {
    for (const state of OPEN_RUN_STATES) runsOpen.set({ target, state }, 0);
    for (const state of RUN_OUTCOMES) {
      runs.inc({ target, state }, 0);
      runSeconds.zero({ target, state });
      if (state !== 'succeeded') runsGivenUp.inc({ target, state }, 0);
    }
  }
  return {
    runs,
    runsGivenUp,
    runSeconds,
    runsOpen,
    setOpenRunSource(source: OpenRunSource) {
      openSource = source;
    },
    runEnded,
    /**
     * Counts a committed report that ended a run (an open run moved to a finished state); any
     * other report (unchanged, refused, a reopen, a start) counts nothing. Call it after the
     * transaction of reportRun or recordDelivery commits, with the target's type.
     */
    runReported(target: string, result: ReportedRun | null) {
      if (result === null || (result.effect !== 'applied' && result.effect !== 'stale')) return;
      const { before, after } = result;
      if (!isOpen(before.state) || !isFinished(after.state)) return;
      if (!(RUN_TARGET_TYPES as readonly string[]).includes(target)) return;
      // A run that ends while pending (a delivery refused for good) never started: not timed.
      const started = before.state !== 'pending' && after.startedAt !== null && after.finishedAt !== null;
      const seconds = started ? (after.finishedAt! - after.startedAt!) / 1000 : null;
      runEnded({
        target: target as RunTargetType,
        state: after.state as RunOutcome,
        seconds,
        final: result.current && after.nextRetryAt === null,
      });
    },
  };
}
