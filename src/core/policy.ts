/**
 * Coverage wait policies: is a period satisfied, and what happens to it now. Pure:
 * `now` and every timestamp are epoch milliseconds handed in by the caller.
 */

/** Every state a period can be in, in order of severity for display (least severe first). */
export const PERIOD_STATES = ['triggered', 'settling', 'waiting', 'rerun_pending', 'missed'] as const;
export type PeriodState = (typeof PERIOD_STATES)[number];
export type TriggerReason = 'covered' | 'ratio' | 'deadline' | 'replay' | 'update' | 'manual';
export type RerunRule = 'never' | 'on_replay' | 'on_update';
/** Why a rerun is owed after a trigger: rebuilt data (a replay requirement) or newer completions. */
export type Rerun = 'replay' | 'update';

export interface Policy {
  /** Minimum complete share per upstream; with neither this nor maxMissing, full coverage. */
  readonly ratio?: number | undefined;
  /** Most that may be not complete per upstream, in the domain's units (µs for time). */
  readonly maxMissing?: number | undefined;
  readonly settleMs: number;
  /** After the period's end; only for time rollups. */
  readonly deadlineMs?: number | undefined;
  readonly onDeadline: 'trigger' | 'miss';
  /**
   * With `onDeadline: 'trigger'`: how long after its deadline a period may still be triggered by
   * it. Older ones are missed, so a `begin` years back or a long outage never floods the target.
   */
  readonly catchUpMs?: number | undefined;
}

export interface UpstreamFacts {
  /** Complete measure / period measure. */
  readonly ratio: number;
  /** Period measure that is not complete (gaps and replay_required). */
  readonly notComplete: number;
  /** Period measure that is replay_required: rebuilt data still owed. */
  readonly replayRequired: number;
}

export interface PeriodFacts {
  readonly state: PeriodState;
  readonly generation: number;
  /** When the period was first seen satisfied in its current unbroken run; null when it is not. */
  readonly satisfiedSince: number | null;
  /** When the newest completion touching the period was ingested; restarts settle. */
  readonly lastChangeAt: number | null;
  /** A rerun owed after a trigger, and why. */
  readonly rerun: Rerun | null;
  readonly manual: boolean;
  /** The period's end as an instant (time rollups), for the deadline. */
  readonly endMs: number | null;
}

export type Outcome =
  | { readonly kind: 'trigger'; readonly reason: TriggerReason }
  | { readonly kind: 'miss' }
  | {
      readonly kind: 'wait';
      readonly state: PeriodState;
      readonly satisfiedSince: number | null;
      /** When to look again without new events (settle end or deadline); null for never. */
      readonly dueAt: number | null;
    };

export type Satisfaction = 'full' | 'partial' | 'no';

export function satisfaction(policy: Policy, upstreams: readonly UpstreamFacts[]): Satisfaction {
  if (upstreams.length > 0 && upstreams.every((u) => u.notComplete === 0)) return 'full';
  if (policy.ratio === undefined && policy.maxMissing === undefined) return 'no';
  // An upstream with nothing complete never satisfies a tolerance: a period nothing happened to
  // is derived, not stored, and must not owe a trigger.
  if (upstreams.some((u) => u.ratio === 0)) return 'no';
  const ok = upstreams.every(
    (u) =>
      (policy.ratio === undefined || u.ratio >= policy.ratio) &&
      (policy.maxMissing === undefined || u.notComplete <= policy.maxMissing),
  );
  return ok ? 'partial' : 'no';
}

export function decide(
  policy: Policy,
  facts: PeriodFacts,
  upstreams: readonly UpstreamFacts[],
  now: number,
): Outcome {
  if (facts.manual) return { kind: 'trigger', reason: 'manual' };
  const satisfied = satisfaction(policy, upstreams);

  if (facts.generation > 0) {
    if (facts.rerun === null) return wait('triggered', null, null);
    // A replay rerun is for the rebuilt data: a tolerant policy may be satisfied while the range
    // is still replay_required, and rerunning then would run on the data the requirement condemned.
    const owed = facts.rerun === 'replay' && upstreams.some((u) => u.replayRequired > 0);
    if (satisfied === 'no' || owed) return wait('rerun_pending', null, null);
    return settle(policy, facts, now, facts.rerun, 'rerun_pending');
  }
  if (facts.state === 'missed') return wait('missed', null, null);
  const deadline =
    policy.deadlineMs !== undefined && facts.endMs !== null ? facts.endMs + policy.deadlineMs : null;
  if (satisfied !== 'no') {
    // A time period runs once it has ended, whatever data claims to cover it early (clock skew,
    // future-dated slices). The deadline, which is after the end, bounds settle too: a satisfied
    // period must not wait longer than one that is not.
    const reason = satisfied === 'full' ? 'covered' : 'ratio';
    return settle(policy, facts, now, reason, 'settling', deadline, facts.endMs);
  }
  if (deadline !== null && now >= deadline) {
    const catchUp = policy.catchUpMs ?? Number.POSITIVE_INFINITY;
    return policy.onDeadline === 'trigger' && now < deadline + catchUp
      ? { kind: 'trigger', reason: 'deadline' }
      : { kind: 'miss' };
  }
  return wait('waiting', null, deadline);
}

/**
 * Satisfied: trigger once it has been so, with no newer completion, for `settle` and not before
 * `earliest` (the period's end), or at `latest` (the first trigger's deadline) if that comes first.
 */
function settle(
  policy: Policy,
  facts: PeriodFacts,
  now: number,
  reason: TriggerReason,
  settlingState: PeriodState,
  latest: number | null = null,
  earliest: number | null = null,
): Outcome {
  const since = facts.satisfiedSince ?? now;
  const quietSince = Math.max(since, facts.lastChangeAt ?? since);
  const settled = Math.max(quietSince + policy.settleMs, earliest ?? -Infinity);
  const due = latest === null ? settled : Math.min(settled, latest);
  if (now >= due) return { kind: 'trigger', reason };
  return wait(settlingState, since, due);
}

function wait(state: PeriodState, satisfiedSince: number | null, dueAt: number | null): Outcome {
  return { kind: 'wait', state, satisfiedSince, dueAt };
}

/** The newest log positions (seq) of one upstream's events that touched a period in one mark. */
export interface TouchSeqs {
  /** Newest completion touching the period; 0 for none. */
  readonly completionSeq: number;
  /** Newest replay requirement touching the period; 0 for none. */
  readonly replaySeq: number;
}

/**
 * Whether events touching a triggered period owe it a rerun (the rollup's `rerun`), and why. `seen` is
 * the upstream's log position its last trigger saw (0 when the trigger recorded none), undefined
 * when the period was never triggered: nothing is owed before a first trigger. A replay
 * requirement newer than the trigger is owed unless `never`; a newer completion only `on_update`.
 */
export function rerunOwed(rule: RerunRule, seen: number | undefined, touch: TouchSeqs): Rerun | null {
  if (seen === undefined || rule === 'never') return null;
  if (touch.replaySeq > seen) return 'replay';
  if (rule === 'on_update' && touch.completionSeq > seen) return 'update';
  return null;
}

/**
 * A period's state right after new events marked it: a triggered period owed a rerun is
 * `rerun_pending` at once (so listings show it before the next evaluation); every other state is
 * left for `decide()` to move.
 */
export function stateAfterMark(state: PeriodState, rerun: Rerun | null): PeriodState {
  return rerun !== null && state === 'triggered' ? 'rerun_pending' : state;
}
