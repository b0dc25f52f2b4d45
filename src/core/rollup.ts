import { parseIntegerBound, parseTimeBound } from './bounds.js';
import { type Calendar, createCalendar, parseEvery } from './calendar.js';
import type { Policy, RerunRule } from './policy.js';
import { DEFAULT_RUN_POLICY, type RunPolicy } from './runs.js';
import type { Domain } from './types.js';

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
  /** The run policy, durations in ms; defaults to DEFAULT_RUN_POLICY. */
  readonly run?: { readonly retries: number; readonly backoff: number; readonly timeout: number } | undefined;
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
  /** Retries, backoff and timeout of its runs. */
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

export function defineRollup(spec: RollupSpec): Rollup {
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
  const begin = calendar.periodContaining(point(spec.begin, 'begin')).start;
  if (domain === 'integer' && spec.policy.deadline !== undefined) {
    throw new RollupDefinitionError(
      'policy.deadline',
      'a deadline needs a time rollup; integer periods have no end time',
    );
  }
  const maxMissing = spec.policy.max_missing;
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
      ? { retries: spec.run.retries, backoffMs: spec.run.backoff, timeoutMs: spec.run.timeout }
      : DEFAULT_RUN_POLICY,
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
