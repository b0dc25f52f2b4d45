/**
 * Where a rollup's runs get their outcome from (`run.outcome`), decided by its target type and its
 * config. Pure: the target module says whether its runs can be followed, the rollup what it set.
 */

/**
 * `target`: the target is asked how each run went (a queue job, a dag run, a materialization), and
 * `POST /v1/runs` reports count too. `delivery`: the run succeeds when the target accepts it (a
 * webhook's 2xx); reports are recorded and move nothing. `callback`: the run is started when
 * accepted and ends by the downstream job's report (`POST /v1/runs`), or at run.timeout.
 */
export const OUTCOME_SOURCES = ['target', 'delivery', 'callback'] as const;
export type OutcomeSource = (typeof OUTCOME_SOURCES)[number];

/** What the rollup's target type says about its runs. */
export interface OutcomeTarget {
  /** The config's `type`, for the message. */
  readonly type: string;
  /** The type can be asked how a run went (its module has follow rules). */
  readonly followed: boolean;
}

/**
 * The outcomes a rollup of this target may set, its default first. A followed target has one, what
 * the target says: `delivery` there would read "a job enqueued is a job done", and `callback` "stop
 * asking the target", while reports through POST /v1/runs count for every type already. A target
 * that cannot be asked succeeds on delivery unless the rollup waits for a callback.
 */
export function outcomesFor(target: OutcomeTarget): readonly OutcomeSource[] {
  return target.followed ? ['target'] : ['delivery', 'callback'];
}

/** The rollup's outcome: what it set, or its target's default; a problem when the target cannot have it. */
export function resolveOutcome(
  target: OutcomeTarget,
  set: OutcomeSource | undefined,
): { readonly outcome: OutcomeSource } | { readonly problem: string } {
  const allowed = outcomesFor(target);
  if (set === undefined) return { outcome: allowed[0]! };
  if (allowed.includes(set)) return { outcome: set };
  return {
    problem: target.followed
      ? `${set} is for a target that cannot be asked how its runs went (a webhook); a ${target.type} target's runs end as the ${target.type} reports them (callbacks through POST /v1/runs count too): leave run.outcome out, or write target`
      : `a ${target.type} target cannot be asked how its runs went: run.outcome is delivery (the default: a run succeeds when the endpoint answers 2xx) or callback (the run waits for POST /v1/runs)`,
  };
}
