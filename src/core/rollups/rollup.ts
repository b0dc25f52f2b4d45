import { parseIntegerBound, parseTimeBound } from '../intervals/bounds.js';
import { type Calendar, createCalendar, parseEvery } from '../periods/calendar.js';
import type { Policy, RerunRule } from '../periods/policy.js';
import { type OutcomeSource, type OutcomeTarget, resolveOutcome } from '../runs/outcome.js';
import { DEFAULT_RUN_POLICY, type RunPolicy } from '../runs/runs.js';
import type { Domain } from '../types.js';

/** A rollup's raw definition, as the config schema hands it over (durations already in ms). */
export interface RollupSpec {
  readonly id: string;
  readonly upstream: readonly string[];
  readonly every: string | number;
  readonly timezone: string;
  readonly begin: string | number;
  readonly origin?: string | number | undefined;
  readonly policy: {
    readonly ratio?: number | undefined;
    readonly max_missing?: number | undefined;
    readonly settle: number;
    readonly deadline?: number | undefined;
    readonly on_deadline: 'trigger' | 'miss';
    readonly catch_up?: number | undefined;
  };
  readonly rerun: RerunRule;
  readonly output?: string | undefined;
  /** The run policy, durations in ms; defaults to DEFAULT_RUN_POLICY's figures. */
  readonly run?:
    | {
        readonly retries: number;
        readonly backoff: number;
        readonly timeout: number;
        /** As written: absent takes the target's default (outcome.ts). */
        readonly outcome?: OutcomeSource | undefined;
      }
    | undefined;
}

/** Deadline triggers are owed for a day after the deadline; older periods are missed. */
export const DEFAULT_CATCH_UP_MS = 86_400_000;

export interface Rollup {
  readonly id: string;
  readonly upstream: readonly string[];
  readonly domain: Domain;
  readonly calendar: Calendar;
  /** Start of the first period. */
  readonly begin: number;
  readonly policy: Policy;
  readonly rerun: RerunRule;
  /** The asset a succeeded run covers over its period, in this rollup's domain. */
  readonly output?: string | undefined;
  /** Retries, backoff, timeout and outcome of its runs. */
  readonly run: RunPolicy;
}

export class RollupDefinitionError extends Error {
  override readonly name = 'RollupDefinitionError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The rollup of a definition. `target`: what its target type says about its runs (the rollup's
 * `target` itself stays on the config side), for the outcome of its runs.
 */
export function defineRollup(spec: RollupSpec, target: OutcomeTarget): Rollup {
  const every = attempt('every', () => parseEvery(spec.every));
  const domain: Domain = every.kind === 'integer' ? 'integer' : 'time';
  const point = (raw: string | number, field: string) =>
    attempt(field, () =>
      domain === 'time'
        ? parseTimeBound(String(raw), field, spec.timezone).value
        : parseIntegerBound(raw, field).value,
    );
  // Duration and integer periods are aligned to `begin` unless an origin says otherwise, so the
  // first period starts where the definition says (calendar units align to themselves).
  const origin =
    spec.origin !== undefined
      ? point(spec.origin, 'origin')
      : every.kind === 'unit'
        ? undefined
        : point(spec.begin, 'begin');
  const calendar = attempt('every', () =>
    createCalendar({ every, timezone: spec.timezone, ...(origin === undefined ? {} : { origin }) }),
  );
  const first = point(spec.begin, 'begin');
  // A period too long for the calendar to place (P1000000Y) is refused here, not thrown at start.
  const begin = attempt('every', () => calendar.periodContaining(first).start);
  if (domain === 'integer' && spec.policy.deadline !== undefined) {
    throw new RollupDefinitionError(
      'policy.deadline',
      'a deadline needs a time rollup; integer periods have no end time',
    );
  }
  const maxMissing = spec.policy.max_missing;
  const outcome = resolveOutcome(target, spec.run?.outcome);
  if ('problem' in outcome) throw new RollupDefinitionError('run.outcome', outcome.problem);
  return {
    id: spec.id,
    upstream: spec.upstream,
    domain,
    calendar,
    begin,
    policy: {
      ratio: spec.policy.ratio,
      // Durations arrive in ms; time points are µs.
      maxMissing: maxMissing === undefined ? undefined : domain === 'time' ? maxMissing * 1000 : maxMissing,
      settleMs: spec.policy.settle,
      deadlineMs: spec.policy.deadline,
      onDeadline: spec.policy.on_deadline,
      catchUpMs:
        spec.policy.deadline === undefined ? undefined : (spec.policy.catch_up ?? DEFAULT_CATCH_UP_MS),
    },
    rerun: spec.rerun,
    ...(spec.output === undefined ? {} : { output: spec.output }),
    run: spec.run
      ? {
          retries: spec.run.retries,
          backoffMs: spec.run.backoff,
          timeoutMs: spec.run.timeout,
          outcome: outcome.outcome,
        }
      : { ...DEFAULT_RUN_POLICY, outcome: outcome.outcome },
  };
}

function attempt<T>(field: string, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof RollupDefinitionError) throw error;
    throw new RollupDefinitionError(field, (error as Error).message);
  }
}
