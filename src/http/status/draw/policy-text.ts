/** A rollup's wait policy in a few words, for its card and its period pages. */
import type { Rollup } from '../../../core/rollups/rollup.js';
import { formatLength } from './format.js';

export function describePolicy(rollup: Rollup): string {
  const p = rollup.policy;
  return [
    p.ratio === undefined && p.maxMissing === undefined ? 'full coverage' : '',
    p.ratio === undefined ? '' : `ratio ≥ ${p.ratio}`,
    p.maxMissing === undefined ? '' : `at most ${formatLength(rollup.domain, p.maxMissing)} missing`,
    p.settleMs > 0 ? `settle ${formatLength('time', p.settleMs * 1000)}` : '',
    p.deadlineMs === undefined
      ? ''
      : `deadline ${formatLength('time', p.deadlineMs * 1000)} (${p.onDeadline})`,
  ]
    .filter((s) => s !== '')
    .join(', ');
}
