import type { RollupRuntime } from '../config/rollups.js';
import { groupBy } from '../core/group-by.js';
import { decideAll, type PeriodDecision, type TriggerDecision } from '../core/periods/decisions.js';
import type { Rollup } from '../core/rollups/rollup.js';
import type { Fence } from '../lease/fence.js';
import type { Metrics } from '../metrics/registry.js';
import { loadUpstreams } from '../store/assets/upstreams.js';
import { type ClaimedPeriod, claimPending, writeUpdates } from '../store/periods/writes.js';
import type { Sql } from '../store/pg/db.js';
import { limitTransaction } from '../store/pg/transaction-limits.js';
import { insertFirstRuns } from '../store/runs/attempts.js';
import { writeTriggers } from '../store/triggers.js';
import type { Logger } from '../support/log.js';
import { redactTarget } from '../targets/secrets.js';
import type { DecidedEvent } from './scheduler-events.js';

export interface EvaluationContext {
  readonly sql: Sql;
  /** The rollups whose periods this call may claim, by id. */
  readonly rollups: ReadonlyMap<string, RollupRuntime>;
  readonly fence: Fence;
  readonly token: number;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Idle-in-transaction limit, about the lease TTL (see transaction-limits.ts). */
  readonly idleMs: number;
  /** Told of every period decided, once committed (the scheduler's `decided` event). */
  readonly onDecided?: (event: DecidedEvent) => void;
}

export interface Evaluation {
  readonly evaluated: number;
  readonly triggered: number;
  /** The batch was full: there may be more periods to evaluate now. */
  readonly more: boolean;
}

/**
 * Claims the newest periods that need it (dirty, due or manually requested) across the given
 * rollups, so a fresh period never waits behind history, and commits every state change, trigger
 * decision and outbox row in one transaction fenced by the lease token.
 */
export async function evaluatePending(ctx: EvaluationContext, now: Date, limit: number): Promise<Evaluation> {
  const claims = claimGroups(
    [...ctx.rollups.values()].map((r) => r.rollup),
    limit,
  );
  if (claims.length === 0) return { evaluated: 0, triggered: 0, more: false };
  let decided: (() => void) | undefined;
  const result = await ctx.sql.begin(async (tx) => {
    // Pipelined (sent together, run in order): every round trip here delays the trigger.
    const [, ...claimed] = await Promise.all([
      limitTransaction(tx, ctx.idleMs),
      ...claims.map((c) => claimPending(tx, c.ids, c.limit, now)),
    ]);
    const periods = claimed.flatMap((c) => c.rows);
    if (periods.length === 0) return { evaluated: 0, triggered: 0, more: false };
    const byRollup = groupBy(periods, (p) => p.rollupId);
    const groups = [...byRollup].map(([id, rows]) => ({ runtime: ctx.rollups.get(id)!, rows }));
    const loaded = await Promise.all(
      groups.map((g) =>
        loadUpstreams(
          tx,
          g.runtime.rollup,
          g.rows.map((r) => ({ start: r.lo, end: r.hi })),
        ),
      ),
    );
    const decisions = groups.map((g, i) => decideAll(g.runtime.rollup, g.rows, loaded[i]!, now));
    // Pipelined too: the fence check locks the lease row before the writes run, and if it fails
    // the whole transaction rolls back, writes included.
    await Promise.all([
      ctx.fence.verify(tx, ctx.token),
      ...decisions.flatMap((d, i) => {
        const { rollup, config } = groups[i]!.runtime;
        return [
          writeUpdates(tx, rollup.id, d.updates, now),
          writeTriggers(tx, rollup.id, d.triggers, redactTarget(config.target), ctx.token, now),
          // After the trigger rows (its key) and the period updates (the generation it matches).
          insertFirstRuns(tx, rollup.id, d.triggers, ctx.token, now),
        ];
      }),
    ]);
    decided = () => {
      for (const d of decisions)
        for (const seconds of d.latencies) ctx.metrics.decisionSeconds.observe(seconds);
      for (const [i, d] of decisions.entries()) {
        logDecisions(ctx, groups[i]!.runtime, d.updates, d.triggers, groups[i]!.rows);
        announce(ctx, groups[i]!.runtime.rollup.id, d.updates, d.triggers, groups[i]!.rows);
      }
    };
    const triggered = decisions.reduce((n, d) => n + d.triggers.length, 0);
    const more = claimed.some((c) => c.full);
    return { evaluated: periods.length, triggered, more };
  });
  decided?.(); // logged and counted only once committed: a fenced commit fails silently otherwise
  return result;
}

/** Tells `onDecided` of every committed decision, in the order the evaluation made them. */
function announce(
  ctx: EvaluationContext,
  rollupId: string,
  updates: readonly PeriodDecision[],
  triggers: readonly TriggerDecision[],
  periods: readonly ClaimedPeriod[],
): void {
  if (!ctx.onDecided) return;
  const keyOf = new Map(periods.map((p) => [p.lo, p.key]));
  const triggerOf = new Map(triggers.map((t) => [t.lo, t]));
  for (const u of updates) {
    const t = triggerOf.get(u.lo);
    ctx.onDecided({
      rollup: rollupId,
      period: keyOf.get(u.lo)!,
      lo: u.lo,
      state: u.state,
      generation: u.generation,
      trigger: t === undefined ? null : { reason: t.reason, idempotencyKey: t.key },
    });
  }
}

function logDecisions(
  ctx: EvaluationContext,
  { rollup, config }: RollupRuntime,
  updates: readonly PeriodDecision[],
  triggers: readonly TriggerDecision[],
  periods: readonly ClaimedPeriod[],
): void {
  const keyOf = new Map(periods.map((p) => [p.lo, p.key]));
  const wasMissed = new Set(periods.filter((p) => p.state === 'missed').map((p) => p.lo));
  for (const t of triggers) {
    ctx.metrics.triggers.inc({ rollup: rollup.id, reason: t.reason, target: config.target.type });
    ctx.log.info(
      {
        rollup: rollup.id,
        period: keyOf.get(t.lo),
        generation: t.generation,
        reason: t.reason,
        idempotency_key: t.key,
        lease_token: ctx.token,
      },
      'triggered',
    );
  }
  for (const u of updates) {
    if (u.state !== 'missed' || wasMissed.has(u.lo)) continue;
    ctx.metrics.periodsMissed.inc({ rollup: rollup.id });
    ctx.log.warn(
      { rollup: rollup.id, period: keyOf.get(u.lo), ratio: u.ratio, lease_token: ctx.token },
      'period missed its deadline',
    );
  }
}

/**
 * Which rollups' pending periods are claimed together, newest first, and how many at most. Time
 * starts are instants, comparable across rollups: the newest periods of all time rollups go first.
 * Integer starts are comparable only within a rollup (offsets of one topic, row ids of one table):
 * claimed together, a backlog at high offsets in one rollup came before every period of another
 * whose offsets are small, until the backlog was done. Each integer rollup is claimed on its own,
 * sharing one limit, so its freshest periods are never behind another's history.
 */
export function claimGroups(
  rollups: ReadonlyArray<Pick<Rollup, 'id' | 'domain'>>,
  limit: number,
): Array<{ ids: string[]; limit: number }> {
  const time = rollups.filter((r) => r.domain === 'time').map((r) => r.id);
  const integer = rollups.filter((r) => r.domain === 'integer').map((r) => r.id);
  const each = Math.max(1, Math.ceil(limit / Math.max(1, integer.length)));
  return [
    ...(time.length > 0 ? [{ ids: time, limit }] : []),
    ...integer.map((id) => ({ ids: [id], limit: each })),
  ];
}
