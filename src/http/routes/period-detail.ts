/**
 * `GET /v1/rollups/{id}/periods/{key}` (SPEC §10): why a period is in its state. Per upstream its
 * ratio, missing and replay_required ranges and versions; the policy's verdict now (satisfied or
 * not, settle remaining, deadline); and every trigger decision made for it, with its delivery.
 */
import type { FastifyInstance } from 'fastify';
import { replayRequiredJson, spanJson } from '../../core/coverage-answer.js';
import { derivedState, periodOfKey, untouchedFacts } from '../../core/periods.js';
import { decide, type PeriodFacts, type PeriodState, satisfaction } from '../../core/policy.js';
import type { RollupRuntime } from '../../scheduler/rollups.js';
import { loadUpstreams, upstreamFacts } from '../../scheduler/upstreams.js';
import type { HttpContext } from '../context.js';
import { HttpError } from '../errors.js';
import { route } from '../route.js';
import { periodDetail } from '../schemas/rollups.js';

/** Ranges listed per upstream at most; the counts say how many there are. */
const MAX_RANGES = 100;

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

export function registerPeriodDetail(find: (id: string) => RollupRuntime) {
  return (app: FastifyInstance, ctx: HttpContext) => {
    route(app, ctx, periodDetail, async ({ params }) => {
      const { rollup } = find(params.id);
      const period = periodOfKey(rollup, params.key);
      const nowMs = ctx.now();
      if (
        period === null ||
        period.start < rollup.begin ||
        (rollup.domain === 'time' && period.start > nowMs * 1000)
      ) {
        throw new HttpError(404, 'unknown_period', `rollup ${rollup.id} has no period ${params.key} (yet)`);
      }
      const { sql } = ctx.read();
      const [[row], triggers, upstreams] = await Promise.all([
        sql<StoredRow[]>`
          select state, generation, ratio, satisfied_since, last_change_at, rerun, manual_requested, reason,
            triggered_at, due_at
          from periods where rollup_id = ${rollup.id} and lo = ${period.start}`,
        sql<TriggerRow[]>`
          select generation, reason, idempotency_key, lease_token, decided_at, delivered_at, failed_at, attempts, last_error
          from triggers where rollup_id = ${rollup.id} and period_lo = ${period.start} order by generation`,
        loadUpstreams(sql, rollup, [period]),
      ]);
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
        deadlineMs === undefined || rollup.domain !== 'time'
          ? null
          : Math.floor(period.end / 1000) + deadlineMs;
      const dueAt = outcome.kind === 'wait' ? outcome.dueAt : null;
      const format = (p: number) => rollup.calendar.formatPoint(p);
      const iso = (d: Date | null) => d?.toISOString() ?? null;
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
        },
        upstreams: Object.fromEntries(
          [...coverages].map(([name, { domain, coverage }], i) => [
            name,
            coverage === null
              ? {
                  seen: false,
                  ratio: 0,
                  missing: [spanJson(domain, period)],
                  missing_count: 1,
                  replay_required: [],
                  replay_required_count: 0,
                  versions: [],
                }
              : {
                  seen: true,
                  ratio: facts[i]!.ratio,
                  missing: coverage.missing.slice(0, MAX_RANGES).map((m) => spanJson(domain, m)),
                  missing_count: coverage.missing.length,
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
      };
    });
  };
}
