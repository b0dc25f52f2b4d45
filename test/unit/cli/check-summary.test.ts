import { describe, expect, it } from 'vitest';
import { describe as describeAnswer } from '../../../src/cli/commands/check-summary.js';
import type { CoverageAnswer } from '../../../src/core/intervals/coverage-answer.js';

const at = (hhmm: string) => `2025-06-01T${hhmm}:00Z`;
const span = (start: string, end: string) => ({ start: at(start), end: at(end) });

/** The answer for [10:00, 11:00) missing `missing` (only the fields the summary reads). */
function answer(missing: Array<{ start: string; end: string }>): CoverageAnswer {
  return {
    asset: 'warehouse.orders',
    domain: 'time',
    start: at('10:00'),
    end: at('11:00'),
    covered: missing.length === 0,
    ratio: 0.5,
    missing,
    missing_count: missing.length,
    missing_total: 1800,
    replay_required: [],
    replay_required_count: 0,
    covered_until: null,
  } as unknown as CoverageAnswer;
}

describe("check's summary line", () => {
  it('names a single missing range once, not as both first and last', () => {
    const one = span('10:30', '11:00');
    expect(describeAnswer(answer([one]), one, one)[0]).toBe(
      'warehouse.orders [2025-06-01T10:00:00Z, 2025-06-01T11:00:00Z): NOT covered, ratio 0.5; 1 missing range (1800 s), 2025-06-01T10:30:00Z .. 2025-06-01T11:00:00Z; 0 replay-required ranges',
    );
  });

  it('names the first and the last of several', () => {
    const [a, b] = [span('10:00', '10:15'), span('10:45', '11:00')];
    expect(describeAnswer(answer([a, b]), a, b)[0]).toContain(
      '2 missing ranges (1800 s), first 2025-06-01T10:00:00Z .. 2025-06-01T10:15:00Z, last 2025-06-01T10:45:00Z .. 2025-06-01T11:00:00Z;',
    );
  });
});
