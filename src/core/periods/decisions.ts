/**
 * What one evaluation decides for the periods it claimed (scheduler/evaluate.ts loads and stores,
 * this decides): each period's new state, ratios, settle and due times, and a trigger with its
 * payload for each period the policy triggers. Pure: `now` and the upstreams' coverage are handed
 * in.
 */
import type { Rollup } from '../rollups/rollup.js';
import { buildPayload, type TriggerPayload } from '../runs/trigger.js';
import { type StoredFacts, storedFacts } from './periods.js';
import { decide, type PeriodState } from './policy.js';
import { type Upstream, upstreamFacts } from './upstream-facts.js';

/** A claimed period: its stored facts and where it lies. */
export interface ClaimedFacts extends StoredFacts {
  readonly lo: number;
  readonly hi: number;
  readonly key: string;
}

/** A period's row after the decision (store/periods/writes.ts writeUpdates). */
export interface PeriodDecision {
  lo: number;
  /** The generation read at the claim: the write is guarded by it. */
  oldGeneration: number;
  generation: number;
  state: PeriodState;
  reason: string | null;
  ratio: number;
  ratios: Record<string, number>;
  satisfiedSince: number | null;
  dueAt: number | null;
  /** Each upstream's log position the trigger saw; null when nothing is triggered. */
  seqs: Record<string, number> | null;
}

/** A trigger decided (store/triggers.ts writeTriggers): its period, generation, key and payload. */
export interface TriggerDecision {
  lo: number;
  generation: number;
  key: string;
  reason: string;
  payload: TriggerPayload;
}

export interface Decisions {
  readonly updates: PeriodDecision[];
  readonly triggers: TriggerDecision[];
  /** For each trigger whose period had an event, seconds from its newest event to `now`. */
  readonly latencies: number[];
}

export function decideAll(
  rollup: Rollup,
  periods: readonly ClaimedFacts[],
  upstreams: ReadonlyMap<string, Upstream>,
  now: Date,
): Decisions {
  const nowMs = now.getTime();
  const updates: PeriodDecision[] = [];
  const triggers: TriggerDecision[] = [];
  const latencies: number[] = [];
  for (const period of periods) {
    const { facts, coverages } = upstreamFacts(rollup, period, upstreams);
    const ratios = Object.fromEntries(rollup.upstream.map((name, i) => [name, facts[i]!.ratio]));
    const ratio = Math.min(...facts.map((f) => f.ratio));
    const outcome = decide(rollup.policy, storedFacts(rollup, period.hi, period), facts, nowMs);
    const base = { lo: period.lo, oldGeneration: period.generation, ratio, ratios };
    if (outcome.kind === 'trigger') {
      const generation = period.generation + 1;
      const payload = buildPayload({
        rollup: rollup.id,
        generation,
        reason: outcome.reason,
        period: {
          start: rollup.calendar.formatPoint(period.lo),
          end: rollup.calendar.formatPoint(period.hi),
          key: period.key,
        },
        periodStart: period.lo,
        domain: rollup.domain,
        upstreams: coverages,
        decidedAt: now,
      });
      const seqs = Object.fromEntries([...upstreams].map(([name, u]) => [name, u.lastSeq]));
      updates.push({
        ...base,
        state: 'triggered',
        generation,
        reason: outcome.reason,
        satisfiedSince: null,
        dueAt: null,
        seqs,
      });
      triggers.push({
        lo: period.lo,
        generation,
        key: payload.idempotency_key,
        reason: outcome.reason,
        payload,
      });
      if (period.lastChangeAt) latencies.push((nowMs - period.lastChangeAt.getTime()) / 1000);
    } else if (outcome.kind === 'miss') {
      updates.push({
        ...base,
        state: 'missed',
        generation: period.generation,
        reason: null,
        satisfiedSince: null,
        dueAt: null,
        seqs: null,
      });
    } else {
      updates.push({
        ...base,
        state: outcome.state,
        generation: period.generation,
        reason: null,
        satisfiedSince: outcome.satisfiedSince,
        dueAt: outcome.dueAt,
        seqs: null,
      });
    }
  }
  return { updates, triggers, latencies };
}
