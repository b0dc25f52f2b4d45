import { describe, expect, it } from 'vitest';
import { parseWait, WAIT_PATTERN } from '../../../../src/core/intervals/wait.js';

const MAX = 900_000;

describe('parseWait', () => {
  it.each([
    ['PT0S', 0],
    ['PT30S', 30_000],
    ['PT1.5S', 1500],
    ['PT0,25S', 250],
    ['PT0.123S', 123],
    ['PT5M', 300_000],
    ['PT1M30S', 90_000],
    ['PT15M', 900_000],
    ['P0D', 0],
    ['P0DT0H1M', 60_000],
  ])('reads %s as %i ms', (text, ms) => {
    expect(parseWait(text, MAX)).toEqual({ ok: true, ms });
  });

  it.each(['', 'P', 'PT', 'P1DT', '5M', 'pt5m', 'PT5', 'P1M', 'P1Y', 'P1W', 'PT0.1234S', 'PT-1S', ' PT1S'])(
    'refuses %j as no duration, as the pattern the API document states does',
    (text) => {
      expect(WAIT_PATTERN.test(text)).toBe(false);
      const parsed = parseWait(text, MAX);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.why).toContain('not an ISO 8601 duration');
    },
  );

  it('refuses a wait over the maximum, naming it', () => {
    expect(parseWait('PT15M0.001S', MAX)).toEqual({
      ok: false,
      why: 'wait PT15M0.001S is longer than the most this daemon holds a request (900 s)',
    });
    expect(parseWait('P1D', MAX).ok).toBe(false);
    expect(parseWait('P99999999999999999D', MAX).ok).toBe(false);
  });
});
