/**
 * The scheduler's run step (SPEC §11): times out runs past `run.timeout`, makes the retries that
 * are due, and asks targets that can be asked (queue, airflow) about the runs they hold. Every part
 * is bounded per pass and reads its rows through a partial index of open work, so a pass with
 * 1,000 open runs and nothing due costs a few index probes.
 */

import type { Rollup } from '../core/rollup.js';
import type { RunPolicy, RunReport } from '../core/runs.js';
import { attemptPayload } from '../core/trigger.js';
import type { Sql } from '../index/db.js';
import { setNextChecks } from '../index/run-deliveries.js';
import { type FollowedRun, retriesDue, runsToCheck, timedOutRuns } from '../index/run-reads.js';
import { startRetry } from '../index/run-retry.js';
import { reportRun, reportRuns } from '../index/runs.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Fence } from './fence.js';
import type { Targets } from './targets/index.js';
import type { StoredTarget } from './targets/secrets.js';

/** Runs asked about per pass at most, in requests of at most OBSERVE_CHUNK runs. */
const CHECK_BATCH = 300;
const OBSERVE_CHUNK = 100;
/**
 * Observations per pass at most, whatever the number of open runs: each is one pipelined batch
 * of job reads for a queue target, at most OBSERVE_PAGES (3) list requests for an Airflow one.
 */
export const MAX_OBSERVATIONS = 4;
const SWEEP_BATCH = 100;

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
    byTarget.set(key, [...(byTarget.get(key) ?? []), run]);
  }
  let requests = 0;
  let left = false;
  const next: Array<{ run: FollowedRun['run']; afterMs: number | null }> = [];
  for (const unsorted of byTarget.values()) {
    // By period, so that one observation covers a narrow window (Airflow lists by logical date).
    const runs = unsorted.sort((a, b) => a.run.lo - b.run.lo || a.run.generation - b.run.generation);
    for (let i = 0; i < runs.length; i += OBSERVE_CHUNK) {
      if (requests >= MAX_OBSERVATIONS || signal.aborted) {
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
        for (const r of chunk) next.push({ run: r.run, afterMs: ctx.checks.openMs });
        continue;
      }
      const reported =
        answer === null
          ? []
          : chunk.flatMap((r) => {
              const report = answer.get(r.runId);
              return report == null ? [] : [{ r, report }];
            });
      const after = new Map((await apply(ctx, reported, stored.type)).map((r) => [r.runId, r]));
      for (const r of chunk) {
        // A target that cannot be asked (a webhook) is not asked again: its runs report themselves.
        next.push({
          run: r.run,
          afterMs: answer === null ? null : nextCheck(ctx, stored.type, after.get(r.runId) ?? r),
        });
      }
    }
  }
  await setNextChecks(ctx.sql, next);
  return { n: next.length, more: left || due.length === CHECK_BATCH };
}

/**
 * Applies a chunk's answers in one transaction (reportRuns): a run and the output its success
 * covers commit together, and a hundred of them cost one commit. Returns the runs as they are now.
 */
async function apply(
  ctx: FollowContext,
  reported: ReadonlyArray<{ readonly r: FollowedRun; readonly report: RunReport }>,
  type: string,
): Promise<FollowedRun[]> {
  if (reported.length === 0) return [];
  const source = type === 'airflow' ? 'airflow' : 'queue';
  const results = await ctx.sql.begin((tx) =>
    reportRuns(
      tx,
      reported.map(({ r, report }) => ({
        ref: r.run,
        report,
        policy: ctx.policyOf(r.run.rollupId),
        rollup: ctx.rollupOf(r.run.rollupId) ?? null,
      })),
      source,
      'changes',
    ),
  );
  return reported.map(({ r }, i) => {
    const result = results[i] ?? null;
    ctx.metrics.runReported(type, result);
    if (!result || (result.effect !== 'applied' && result.effect !== 'stale')) return r;
    const { state, error, finishedAt } = result.after;
    ctx.log.info({ ...logIds(r.run), run_id: r.runId, state, error, current: result.current }, 'run outcome');
    return { ...r, state, finishedAt: finishedAt === null ? null : new Date(finishedAt) };
  });
}

/** Open: ask again soon. Finished: stop, except an Airflow run, watched for a clear for run.timeout. */
function nextCheck(ctx: FollowContext, type: string, r: FollowedRun): number | null {
  if (r.state === 'started' || r.state === 'running') return ctx.checks.openMs;
  if (r.state === 'pending' || type !== 'airflow' || r.finishedAt === null) return null;
  const watchUntil = r.finishedAt.getTime() + ctx.policyOf(r.run.rollupId).timeoutMs;
  return Date.now() < watchUntil ? ctx.checks.watchMs : null;
}

const logIds = (run: { rollupId: string; lo: number; generation: number; attempt: number }) => ({
  rollup: run.rollupId,
  period_lo: run.lo,
  generation: run.generation,
  attempt: run.attempt,
});
