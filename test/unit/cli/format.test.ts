import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatRatio, plural } from '../../../src/cli/format.js';

describe('formatRatio', () => {
  it('prints four decimals at most', () => {
    expect([1 / 12, 0.5, 0, 1, 2 / 3].map(formatRatio)).toEqual(['0.0833', '0.5', '0', '1', '0.6667']);
  });

  it('never prints a bound a ratio has not reached, and stays within 0.0001 of it', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1, noNaN: true }), (ratio) => {
        const printed = Number(formatRatio(ratio));
        expect(printed === 1).toBe(ratio === 1);
        expect(printed === 0).toBe(ratio === 0);
        expect(Math.abs(printed - ratio)).toBeLessThanOrEqual(0.0001);
        expect(formatRatio(ratio)).toMatch(/^(0|1|0\.\d{1,4})$/);
      }),
    );
  });
});

describe('plural', () => {
  it('agrees with the number', () => {
    expect([0, 1, 2].map((n) => plural(n, 'segment'))).toEqual(['0 segments', '1 segment', '2 segments']);
  });
});
