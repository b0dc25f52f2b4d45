import type { RollupConfig } from '../config/index.js';
import type { Domain } from '../core/types.js';

/**
 * A rollup's policy as the API answers it: durations as ISO 8601, as config takes them (config
 * holds them in ms). `max_missing` is a duration for a time rollup and a count of offsets for an
 * integer one.
 */
export function policyJson(policy: RollupConfig['policy'], domain: Domain) {
  const { ratio, max_missing, settle, deadline, on_deadline, catch_up } = policy;
  const duration = (ms: number | undefined) => (ms === undefined ? undefined : isoDuration(ms));
  return {
    ratio,
    max_missing: domain === 'time' ? duration(max_missing) : max_missing,
    settle: isoDuration(settle),
    deadline: duration(deadline),
    on_deadline,
    catch_up: duration(catch_up),
  };
}

const UNITS = [
  ['D', 86_400_000],
  ['H', 3_600_000],
  ['M', 60_000],
] as const;

/**
 * The shortest ISO 8601 spelling of a duration in days, hours, minutes and seconds: PT30S, PT6H,
 * P1D, P1DT1H30M, PT0.5S. A day is 24 hours here, as config reads P1D.
 */
export function isoDuration(ms: number): string {
  let rest = ms;
  let date = '';
  let time = '';
  for (const [unit, size] of UNITS) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n === 0) continue;
    if (unit === 'D') date = `${n}D`;
    else time += `${n}${unit}`;
  }
  if (rest > 0 || (date === '' && time === '')) time += `${Number((rest / 1000).toFixed(3))}S`;
  return `P${date}${time === '' ? '' : `T${time}`}`;
}
