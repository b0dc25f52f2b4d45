/**
 * The events a rollup writes on its output asset: a completion over a
 * period when a run succeeds, and a replay requirement over it (condemnation) the moment the period
 * owes a rerun, so a rollup reading the output waits for the rerun instead of running on data that
 * is about to change. Pure: the index commits them like any producer's events.
 */
import { formatTime } from './bounds.js';
import type { NormalizedEvent } from './events.js';
import type { Rollup } from './rollup.js';
import { idempotencyKey } from './trigger.js';
import type { Interval } from './types.js';

/** The version a generation's output carries unless its run reported one: `{rollup}#{generation}`. */
export function outputVersion(rollupId: string, generation: number): string {
  return `${rollupId}#${generation}`;
}

/**
 * The replay requirement recorded on `rollup`'s output when `period` becomes rerun_pending at
 * generation `generation`: the output must be rebuilt at `{rollup}#{generation + 1}`. Its id is
 * derived from the generation it waits for, so recording it twice (a second replay touching the
 * same pending period, a pass redone after a crash) is a duplicate that changes nothing.
 */
export function condemnation(rollup: Rollup, period: Interval, generation: number): NormalizedEvent {
  const next = generation + 1;
  return outputEvent(rollup, period, {
    kind: 'replay_requirement',
    version: outputVersion(rollup.id, next),
    id: `condemn~${idempotencyKey(rollup.id, rollup.domain, period.start, next)}`,
  });
}

/**
 * The completion recorded on `rollup`'s output when the run `runId` of generation `generation`
 * succeeds: at the version the run reported, else `{rollup}#{generation}`; the run id is its
 * event id, so a success reported twice records one completion.
 */
export function outputCompletion(
  rollup: Rollup,
  period: Interval,
  generation: number,
  runId: string,
  version: string | null = null,
): NormalizedEvent {
  return outputEvent(rollup, period, {
    kind: 'completion',
    version: version ?? outputVersion(rollup.id, generation),
    id: runId,
  });
}

function outputEvent(
  rollup: Rollup,
  period: Interval,
  e: { kind: NormalizedEvent['kind']; version: string; id: string },
): NormalizedEvent {
  if (rollup.output === undefined) throw new Error(`rollup ${rollup.id} has no output asset`);
  const text = (v: number) => (rollup.domain === 'time' ? formatTime(v) : String(v));
  return {
    kind: e.kind,
    asset: rollup.output,
    domain: rollup.domain,
    zone: 'UTC',
    start: { domain: rollup.domain, value: period.start, text: text(period.start) },
    end: { domain: rollup.domain, value: period.end, text: text(period.end) },
    version: e.version,
    id: e.id,
    producedAt: null,
    extra: {},
    key: `id:${e.id}`,
  };
}
