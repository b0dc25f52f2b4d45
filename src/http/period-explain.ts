/**
 * Why one period is in its state, computed once for `GET /v1/rollups/{id}/periods/{key}`
 * and for the status page's period page: per upstream its ratio, missing and replay_required
 * ranges and versions; the policy's verdict now (satisfied or not, settle remaining, deadline);
 * and every trigger decision made for it, with its delivery.
 */

import type { ReplayRequiredJson, SpanJson } from '../core/coverage-answer.js';
import { replayRequiredJson, spanJson } from '../core/coverage-answer.js';
import { periodOfKey, storedFacts, untouchedFacts } from '../core/periods.js';
import { decide, type PeriodState, type Rerun, type Satisfaction, satisfaction } from '../core/policy.js';
import type { Rollup } from '../core/rollup.js';
import { upstreamFacts } from '../core/upstream-facts.js';
import { loadUpstreams } from '../store/assets/upstreams.js';
import { periodAt } from '../store/periods/listing.js';
import type { Db } from '../store/pg/db.js';
import { periodRuns, type RunReportView, type RunView } from '../store/runs/history.js';
import { triggersOfPeriod } from '../store/triggers.js';
import { runJson } from './routes/run-json.js';

/** Ranges listed per upstream at most; the counts say how many there are. */
const MAX_RANGES = 100;
/** Runs listed at most (every attempt of every generation, newest first). */
export const MAX_RUNS = 100;

export interface UpstreamExplanation {
  seen: boolean;
  ratio: number;
  missing: SpanJson[];
  missing_count: number;
  /** Measure of the missing parts: seconds for time, values for integers. */
  missing_total: number;
  replay_required: ReplayRequiredJson[];
  replay_required_count: number;
  versions: string[];
}

export interface PeriodExplanation {
  rollup: string;
  period: {
    start: string | number;
    end: string | number;
    key: string;
    state: PeriodState;
    stored: boolean;
    ratio: number;
    generation: number;
    reason: string | null;
    triggered_at: string | null;
    rerun: Rerun | null;
    manual_requested: boolean;
    /** The current run: the newest attempt of the period's generation; null before the first trigger. */
    run: ReturnType<typeof runJson> | null;
  };
  upstreams: Record<string, UpstreamExplanation>;
  verdict: {
    satisfied: Satisfaction;
    /** What the policy does now: `wait (state)`, `trigger (reason)` or `miss`. */
    outcome: string;
    due_at: string | null;
    settle_remaining_seconds: number | null;
    deadline_at: string | null;
  };
  triggers: Array<{
    generation: number;
    reason: string;
    idempotency_key: string;
    lease_token: number;
    decided_at: string;
    delivered_at: string | null;
    failed_at: string | null;
    attempts: number;
    last_error: string | null;
  }>;
  /** Every attempt of every generation, newest first, each with its reports. */
  runs: Array<RunView & { reports: RunReportView[] }>;
}

/** The explanation of the rollup's period `key` at `nowMs`; null when it has no such period (yet). */
export async function explainPeriod(
  sql: Db,
  rollup: Rollup,
  key: string,
  nowMs: number,
): Promise<PeriodExplanation | null> {
  const period = periodOfKey(rollup, key);
  if (
    period === null ||
    period.start < rollup.begin ||
    (rollup.domain === 'time' && period.start > nowMs * 1000)
  ) {
    return null;
  }
  const [{ view, stored: row }, triggers, upstreams, runs] = await Promise.all([
    periodAt(sql, rollup, period, nowMs),
    triggersOfPeriod(sql, rollup.id, period.start),
    loadUpstreams(sql, rollup, [period]),
    periodRuns(sql, rollup.id, period.start, MAX_RUNS),
  ]);
  // Newest first: the first run of the period's generation is its newest attempt.
  const current = view.generation > 0 ? runs.find((r) => r.generation === view.generation) : undefined;
  const { facts, coverages } = upstreamFacts(rollup, { lo: period.start, hi: period.end }, upstreams);
  const periodFacts = row ? storedFacts(rollup, period.end, row) : untouchedFacts(rollup, period);
  const outcome = decide(rollup.policy, periodFacts, facts, nowMs);
  const { deadlineMs } = rollup.policy;
  const deadlineAt =
    deadlineMs === undefined || rollup.domain !== 'time' ? null : Math.floor(period.end / 1000) + deadlineMs;
  const dueAt = outcome.kind === 'wait' ? outcome.dueAt : null;
  const format = (p: number) => rollup.calendar.formatPoint(p);
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  // Seconds for time (points are µs), values for integers, as the coverage answer's missing_total.
  const measure = (points: number) => (rollup.domain === 'time' ? points / 1_000_000 : points);
  return {
    rollup: rollup.id,
    period: {
      start: format(period.start),
      end: format(period.end),
      key: period.key,
      state: view.state,
      stored: row !== null,
      ratio: Math.min(...facts.map((f) => f.ratio)),
      generation: view.generation,
      reason: view.reason,
      triggered_at: iso(view.triggeredAt),
      rerun: row?.rerun ?? null,
      manual_requested: row?.manualRequested ?? false,
      run: current ? runJson(current) : null,
    },
    upstreams: Object.fromEntries(
      [...coverages].map(([name, { domain, coverage }], i): [string, UpstreamExplanation] => [
        name,
        coverage === null
          ? {
              seen: false,
              ratio: 0,
              missing: [spanJson(domain, period)],
              missing_count: 1,
              missing_total: measure(period.end - period.start),
              replay_required: [],
              replay_required_count: 0,
              versions: [],
            }
          : {
              seen: true,
              ratio: facts[i]!.ratio,
              missing: coverage.missing.slice(0, MAX_RANGES).map((m) => spanJson(domain, m)),
              missing_count: coverage.missing.length,
              missing_total: measure(coverage.missing.reduce((sum, m) => sum + (m.end - m.start), 0)),
              replay_required: coverage.replayRequired
                .slice(0, MAX_RANGES)
                .map((r) => replayRequiredJson(domain, r)),
              replay_required_count: coverage.replayRequired.length,
              versions: coverage.versions,
            },
      ]),
    ),
    verdict: {
      satisfied: satisfaction(rollup.policy, facts),
      outcome:
        outcome.kind === 'trigger'
          ? `trigger (${outcome.reason})`
          : outcome.kind === 'miss'
            ? 'miss'
            : `wait (${outcome.state})`,
      due_at: dueAt === null ? null : new Date(dueAt).toISOString(),
      settle_remaining_seconds:
        outcome.kind === 'wait' && outcome.satisfiedSince !== null && dueAt !== null
          ? Math.max(0, (dueAt - nowMs) / 1000)
          : null,
      deadline_at: deadlineAt === null ? null : new Date(deadlineAt).toISOString(),
    },
    triggers: triggers.map((t) => ({
      generation: t.generation,
      reason: t.reason,
      idempotency_key: t.idempotency_key,
      lease_token: t.lease_token,
      decided_at: t.decided_at.toISOString(),
      delivered_at: iso(t.delivered_at),
      failed_at: iso(t.failed_at),
      attempts: t.attempts,
      last_error: t.last_error,
    })),
    runs,
  };
}
