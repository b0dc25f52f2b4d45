/**
 * Why one period is in its state (SPEC §10), computed once for `GET /v1/rollups/{id}/periods/{key}`
 * and for the status page's period page: per upstream its ratio, missing and replay_required
 * ranges and versions; the policy's verdict now (satisfied or not, settle remaining, deadline);
 * every trigger decision made for it, with its delivery; and its runs (SPEC §11), with their reports.
 */

import type { ReplayRequiredJson, SpanJson } from '../core/coverage-answer.js';
import { replayRequiredJson, spanJson } from '../core/coverage-answer.js';
import { derivedState, periodOfKey, untouchedFacts } from '../core/periods.js';
import {
  decide,
  type PeriodFacts,
  type PeriodState,
  type Satisfaction,
  satisfaction,
} from '../core/policy.js';
import type { Rollup } from '../core/rollup.js';
import type { Db } from '../index/db.js';
import { periodRuns, type RunReportView, type RunView } from '../index/run-reads.js';
import { loadUpstreams, upstreamFacts } from '../scheduler/upstreams.js';
import { runJson } from './routes/run-json.js';

/** Ranges listed per upstream at most; the counts say how many there are. */
const MAX_RANGES = 100;
/** Runs listed at most (every attempt of every generation, newest first). */
const MAX_RUNS = 100;

interface StoredRow {
  state: PeriodState;
  generation: number;
  ratio: number;
  satisfied_since: Date | null;
  last_change_at: Date | null;
  rerun: 'replay' | 'update' | null;
  manual_requested: boolean;
  reason: string | null;
  triggered_at: Date | null;
  due_at: Date | null;
  run_attempt: number | null;
}

interface TriggerRow {
  generation: number;
  reason: string;
  idempotency_key: string;
  lease_token: number;
  decided_at: Date;
  delivered_at: Date | null;
  failed_at: Date | null;
  attempts: number;
  last_error: string | null;
}

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
    rerun: 'replay' | 'update' | null;
    manual_requested: boolean;
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
  const [[row], triggers, upstreams, runs] = await Promise.all([
    sql<StoredRow[]>`
      select state, generation, ratio, satisfied_since, last_change_at, rerun, manual_requested, reason,
        triggered_at, due_at, run_attempt
      from periods where rollup_id = ${rollup.id} and lo = ${period.start}`,
    sql<TriggerRow[]>`
      select generation, reason, idempotency_key, lease_token, decided_at, delivered_at, failed_at, attempts, last_error
      from triggers where rollup_id = ${rollup.id} and period_lo = ${period.start} order by generation`,
    loadUpstreams(sql, rollup, [period]),
    periodRuns(sql, rollup.id, period.start, MAX_RUNS),
  ]);
  const current = row
    ? runs.find((r) => r.generation === row.generation && r.attempt === row.run_attempt)
    : undefined;
  const { facts, coverages } = upstreamFacts(rollup, { lo: period.start, hi: period.end }, upstreams);
  const periodFacts: PeriodFacts = row
    ? {
        state: row.state,
        generation: row.generation,
        satisfiedSince: row.satisfied_since?.getTime() ?? null,
        lastChangeAt: row.last_change_at?.getTime() ?? null,
        rerun: row.rerun,
        manual: row.manual_requested,
        endMs: rollup.domain === 'time' ? Math.floor(period.end / 1000) : null,
      }
    : untouchedFacts(rollup, period);
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
      state: row?.state ?? derivedState(rollup, period, nowMs),
      stored: row !== undefined,
      ratio: Math.min(...facts.map((f) => f.ratio)),
      generation: row?.generation ?? 0,
      reason: row?.reason ?? null,
      triggered_at: iso(row?.triggered_at ?? null),
      rerun: row?.rerun ?? null,
      manual_requested: row?.manual_requested ?? false,
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
