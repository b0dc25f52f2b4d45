import { describe, expect, it } from 'vitest';
import { formatIsoDuration, freshnessOf } from '../../../../src/core/intervals/freshness.js';

const NOW = Date.parse('2026-12-03T12:00:00Z');
const us = (iso: string) => Date.parse(iso) * 1000;

describe('freshnessOf', () => {
  it('measures a time asset lag from the end of its complete coverage to now', () => {
    const f = freshnessOf(
      {
        domain: 'time',
        coveredUntil: us('2026-12-03T11:30:00Z'),
        lastEventAt: Date.parse('2026-12-03T11:59:00Z'),
      },
      NOW,
    );
    expect(f).toEqual({
      covered_until: '2026-12-03T11:30:00Z',
      lag_seconds: 1800,
      last_event_at: '2026-12-03T11:59:00.000Z',
      max_lag: null,
      stale: null,
      stale_reason: null,
    });
  });

  it('is stale past max_lag, with the reason, and fresh within it', () => {
    const facts = { domain: 'time' as const, coveredUntil: us('2026-12-03T11:30:00Z'), lastEventAt: NOW };
    expect(freshnessOf({ ...facts, maxLagMs: 20 * 60_000 }, NOW)).toMatchObject({
      max_lag: 'PT20M',
      stale: true,
      stale_reason: 'covered until 2026-12-03T11:30:00Z, PT30M ago, more than max_lag PT20M',
    });
    expect(freshnessOf({ ...facts, maxLagMs: 30 * 60_000 }, NOW)).toMatchObject({
      stale: false,
      stale_reason: null,
    });
  });

  it('counts coverage reaching past now as no lag', () => {
    const f = freshnessOf(
      { domain: 'time', coveredUntil: us('2026-12-04T00:00:00Z'), lastEventAt: NOW },
      NOW,
    );
    expect(f.lag_seconds).toBe(0);
  });

  it('calls an asset with nothing complete stale when it has an expectation', () => {
    const f = freshnessOf({ domain: 'time', coveredUntil: null, lastEventAt: null, maxLagMs: 60_000 }, NOW);
    expect(f).toMatchObject({ covered_until: null, lag_seconds: null, stale: true });
  });

  it('judges an integer asset on the time since its last event; its lag is null', () => {
    const facts = { domain: 'integer' as const, coveredUntil: 4096, lastEventAt: NOW - 3_600_000 };
    expect(freshnessOf({ ...facts, maxLagMs: 7_200_000 }, NOW)).toMatchObject({
      covered_until: 4096,
      lag_seconds: null,
      stale: false,
    });
    expect(freshnessOf({ ...facts, maxLagMs: 1_800_000 }, NOW)).toMatchObject({
      stale: true,
      stale_reason: 'last event PT1H ago, more than max_lag PT30M',
    });
  });
});

describe('formatIsoDuration', () => {
  it('writes hours, minutes and seconds', () => {
    expect(formatIsoDuration(0)).toBe('PT0S');
    expect(formatIsoDuration(1_200_000)).toBe('PT20M');
    expect(formatIsoDuration(93_784_500)).toBe('PT26H3M4.5S');
  });
});
