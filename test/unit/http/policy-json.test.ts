import fc from 'fast-check';
import { Duration } from 'luxon';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/index.js';
import { isoDuration, policyJson } from '../../../src/http/policy-json.js';

describe('isoDuration', () => {
  it('spells common durations as config takes them', () => {
    expect([0, 500, 30_000, 300_000, 21_600_000, 86_400_000, 91_800_000, 3_661_001].map(isoDuration)).toEqual(
      ['PT0S', 'PT0.5S', 'PT30S', 'PT5M', 'PT6H', 'P1D', 'P1DT1H30M', 'PT1H1M1.001S'],
    );
  });

  it('reads back as the same number of milliseconds (as config reads it)', () => {
    fc.assert(
      fc.property(fc.nat({ max: 400 * 86_400_000 }), (ms) => {
        expect(Duration.fromISO(isoDuration(ms)).toMillis()).toBe(ms);
      }),
    );
  });
});

describe('policyJson', () => {
  const policyOf = (policy: Record<string, unknown>) =>
    parseConfig({
      rollups: [
        {
          id: 'r',
          upstream: ['a'],
          every: 'hour',
          begin: '2025-06-01',
          policy,
          target: { type: 'queue', queue: 'q' },
        },
      ],
    }).rollups[0]!.policy;

  it('answers every configured duration in ISO 8601', () => {
    const policy = policyOf({ max_missing: 'PT5M', settle: 'PT30S', deadline: 'PT6H', catch_up: 'P2D' });
    expect(JSON.parse(JSON.stringify(policyJson(policy, 'time')))).toEqual({
      max_missing: 'PT5M',
      settle: 'PT30S',
      deadline: 'PT6H',
      on_deadline: 'trigger',
      catch_up: 'P2D',
    });
  });

  it('keeps an integer rollup max_missing a count', () => {
    expect(policyJson(policyOf({ max_missing: 10 }), 'integer')).toMatchObject({
      max_missing: 10,
      settle: 'PT0S',
    });
  });
});
