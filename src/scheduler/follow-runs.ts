/**
 * The scheduler's run step: times out runs past `run.timeout`, makes the retries that
 * are due, and asks targets that can be asked (queue, airflow) about the runs they hold. Every part
 * is bounded per pass and reads its rows through a partial index of open work, so a pass with
 * 1,000 open runs and nothing due costs a few index probes.
 */

import type { Rollup } from '../core/rollup.js';
import type { RunPolicy, RunReport } from '../core/runs.js';
import { attemptPayload } from '../core/trigger.js';
import type { Fence } from '../lease/fence.js';
import type { Metrics } from '../metrics/registry.js';
import type { Sql } from '../store/pg/db.js';
import { startRetry } from '../store/runs/attempts.js';
import { setNextChecks } from '../store/runs/next-checks.js';
import { reportRun, reportRuns } from '../store/runs/report.js';
import { type FollowedRun, retriesDue, runsToCheck, timedOutRuns } from '../store/runs/work.js';
import type { Logger } from '../support/log.js';
import type { Targets } from '../targets/index.js';
import type { StoredTarget } from '../targets/secrets.js';

/** Runs asked about per pass at most, in requests of at most OBSERVE_CHUNK runs. */
const CHECK_BATCH = 300;
const OBSERVE_CHUNK = 100;
/**
 * Observations per pass at most, whatever the number of open runs: each is one pipelined batch
 * of job reads for a queue target, at most OBSERVE_PAGES (3) list requests for an Airflow one.
 */
export const MAX_OBSERVATIONS = 4;
const SWEEP_BATCH = 100;
/** The longest wait between two checks of a queue job that stays open. */
const OPEN_CHECK_MAX_MS = 60_000;

export interface CheckIntervals {
  /** How often an open run's target is asked about it. */
  readonly openMs: number;
  /** How often a finished Airflow run is asked about again (a clear reopens it), for run.timeout after it finished. */
  readonly watchMs: number;
}

export const DEFAULT_CHECKS: CheckIntervals = { openMs: 2000, watchMs: 30_000 };

export interface FollowContext {
  readonly sql: Sql;
  readonly targets: Targets;
  readonly fence: Fence;
  readonly token: number;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly policyOf: (rollupId: string) => RunPolicy;
  readonly targetTypeOf: (rollupId: string) => string | undefined;
  /** The configured rollup, whose output a success covers; undefined once it is no longer configured. */
  readonly rollupOf: (rollupId: string) => Rollup | undefined;
  readonly checks: CheckIntervals;
  /** True when fresh work waits (new events): the checks stop after their first observation. */
  readonly yieldTo?: () => boolean;
}

/** One bounded round of run work; `more` when a batch was full (work is left for the next pass). */
export async function followRuns(
  ctx: FollowContext,
  signal: AbortSignal,
): Promise<{ work: boolean; more: boolean }> {
  const timeouts = await timeOut(ctx, signal);
  const retries = await retry(ctx, signal);
  const checks = await check(ctx, signal);
  return {
    work: timeouts.n + retries.n + checks.n > 0,
    more: timeouts.more || retries.more || checks.more,
  };
}

async function timeOut(ctx: FollowContext, signal: AbortSignal) {
  const due = await timedOutRuns(ctx.sql, SWEEP_BATCH);
  for (const run of due) {
    if (signal.aborted) break;
    const result = await ctx.sql.begin((tx) =>
      reportRun(tx, run, { kind: 'timeout' }, 'scheduler', ctx.policyOf(run.rollupId), { record: 'all' }),
    );
    ctx.metrics.runReported(ctx.targetTypeOf(run.rollupId) ?? '', result);
    if (result?.effect === 'applied' || result?.effect === 'stale')
      ctx.log.warn({ ...logIds(run), error: result.after.error }, 'run timed out');
  }
  return { n: due.length, more: due.length === SWEEP_BATCH };
}

/** Attempt N + 1 for each unsuccessful run whose next_retry_at has come, fenced like a decision. */
async function retry(ctx: FollowContext, signal: AbortSignal) {
  const due = await retriesDue(ctx.sql, SWEEP_BATCH);
  for (const run of due) {
    if (signal.aborted) break;
    const result = await ctx.sql.begin(async (tx) => {
      await ctx.fence.verify(tx, ctx.token);
      return startRetry(tx, run.rollupId, run.lo, 'retry', ctx.token, run);
    });
    if (result.ok) ctx.log.info({ ...logIds(result.run), run_id: result.runId }, 'retrying the run');
  }
  return { n: due.length, more: due.length === SWEEP_BATCH };
}

/** Asks targets about due runs, a bounded number of requests per pass, and applies what changed. */
async function check(ctx: FollowContext, signal: AbortSignal) {
  // Checks due within half an interval go now: a pass every half interval at most, however many runs.
  const due = await runsToCheck(ctx.sql, CHECK_BATCH, ctx.checks.openMs / 2);
  if (due.length === 0) return { n: 0, more: false };
  const byTarget = new Map<string, FollowedRun[]>();
  for (const run of due) {
    const key = JSON.stringify(run.target);
    const runs = byTarget.get(key);
    // Appended in place: a copy per run was quadratic, 45,000 element copies for a batch of 300.
    if (runs) runs.push(run);
    else byTarget.set(key, [run]);
  }
  let requests = 0;
  let left = false;
  const next: Array<{ run: FollowedRun['run']; afterMs: number | null; seen: string }> = [];
  for (const unsorted of byTarget.values()) {
    // By period, so that one observation covers a narrow window (Airflow lists by logical date).
    const runs = unsorted.sort((a, b) => a.run.lo - b.run.lo || a.run.generation - b.run.generation);
    for (let i = 0; i < runs.length; i += OBSERVE_CHUNK) {
      if (requests >= MAX_OBSERVATIONS || signal.aborted || (requests > 0 && ctx.yieldTo?.())) {
        left = true; // still due: asked on a later pass
        break;
      }
      const chunk = runs.slice(i, i + OBSERVE_CHUNK);
      requests++;
      const stored = chunk[0]!.target as StoredTarget;
      const answer = await ctx.targets.observe(
        stored,
        chunk.map((r) => ({ runId: r.runId, payload: attemptPayload(r.payload, r.run.attempt) })),
      );
      if (answer !== null && 'error' in answer) {
        ctx.log.warn(
          { target: stored.type, runs: chunk.length, error: answer.error },
          'could not ask the target about its runs',
        );
        for (const r of chunk) next.push({ run: r.run, afterMs: ctx.checks.openMs, seen: r.checkSeen });
        continue;
      }
      // A report of the state the run is in would change nothing, and polls record changes only.
      const moves = chunk.flatMap((r) => {
        const report = answer?.get(r.runId) ?? null;
        return report === null || (report.kind === 'target' && report.state === r.state)
          ? []
          : [{ r, report }];
      });
      const moved = await apply(ctx, moves, stored.type);
      for (const r of chunk) {
        const after = moved.get(r) ?? r;
        // A target that cannot be asked (a webhook) is not asked again: its runs report themselves.
        next.push({
          run: r.run,
          seen: r.checkSeen,
          afterMs:
            answer === null
              ? null
              : nextCheckMs(
                  stored.type,
                  after,
                  ctx.checks,
                  ctx.policyOf(r.run.rollupId).timeoutMs,
                  Date.now(),
                ),
        });
      }
    }
  }
  await setNextChecks(ctx.sql, next);
  return { n: next.length, more: left || due.length === CHECK_BATCH };
}

/**
 * Applies one observation's reports in one transaction: a burst of outcomes (every hourly job
 * ending at the top of the hour) commits once per observation, not once per run, and the outputs
 * of its successes in one commit (reportRuns). Periods are locked in (rollup, period) order; the
 * other writers of runs (callbacks, manual retries) lock one period each, so they wait for the
 * batch rather than deadlock with it. Returns the runs that moved.
 */
async function apply(
  ctx: FollowContext,
  moves: ReadonlyArray<{ readonly r: FollowedRun; readonly report: RunReport }>,
  type: string,
): Promise<Map<FollowedRun, FollowedRun>> {
  const moved = new Map<FollowedRun, FollowedRun>();
  if (moves.length === 0) return moved;
  const source =
    type === 'airflow' || type === 'airflow_asset' ? 'airflow' : type === 'dagster' ? 'dagster' : 'queue';
  const ordered = [...moves].sort(
    (a, b) => a.r.run.rollupId.localeCompare(b.r.run.rollupId) || a.r.run.lo - b.r.run.lo,
  );
  const results = await ctx.sql.begin((tx) =>
    reportRuns(
      tx,
      ordered.map(({ r, report }) => ({
        ref: r.run,
        report,
        policy: ctx.policyOf(r.run.rollupId),
        rollup: ctx.rollupOf(r.run.rollupId) ?? null,
      })),
      source,
      'changes',
    ),
  );
  // Told only once committed.
  ordered.forEach(({ r }, i) => {
    const result = results[i] ?? null;
    ctx.metrics.runReported(type, result);
    if (!result || (result.effect !== 'applied' && result.effect !== 'stale')) return;
    const { state, error, finishedAt } = result.after;
    ctx.log.info({ ...logIds(r.run), run_id: r.runId, state, error, current: result.current }, 'run outcome');
    moved.set(r, { ...r, state, finishedAt: finishedAt === null ? null : new Date(finishedAt) });
  });
  return moved;
}

/**
 * Open: ask again soon; a queue job open for long, after a tenth of its age (at most
 * OPEN_CHECK_MAX_MS): its outcome arrives through the queue's event stream at once, the checks are
 * the safety net for what the stream missed, and checking thousands of long-waiting jobs every
 * interval cost every pass (and a fresh period waiting behind it) for nothing. Airflow has no such
 * stream, so its runs keep the interval. Finished: stop, except an Airflow run, watched for a clear
 * for run.timeout.
 */
export function nextCheckMs(
  type: string,
  r: Pick<FollowedRun, 'state' | 'startedAt' | 'finishedAt'>,
  checks: CheckIntervals,
  timeoutMs: number,
  now: number,
): number | null {
  if (r.state === 'started' || r.state === 'running') {
    if (type !== 'queue' || r.startedAt === null) return checks.openMs;
    const ageMs = now - r.startedAt.getTime();
    return Math.max(checks.openMs, Math.min(OPEN_CHECK_MAX_MS, ageMs / 10));
  }
  if (r.state === 'pending' || type !== 'airflow' || r.finishedAt === null) return null;
  const watchUntil = r.finishedAt.getTime() + timeoutMs;
  return now < watchUntil ? checks.watchMs : null;
}

const logIds = (run: { rollupId: string; lo: number; generation: number; attempt: number }) => ({
  rollup: run.rollupId,
  period_lo: run.lo,
  generation: run.generation,
  attempt: run.attempt,
});
