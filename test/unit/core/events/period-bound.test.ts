import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../../src/config/index.js';
import { defineRollups } from '../../../../src/config/rollups.js';
import { BadInputError } from '../../../../src/core/errors.js';
import { type NormalizeOptions, normalizeEvent } from '../../../../src/core/events/events.js';
import { checkPeriodBound, MAX_PERIODS_PER_EVENT } from '../../../../src/core/events/period-bound.js';
import { readersOf } from '../../../../src/ingest/precheck.js';

const target = { type: 'queue', queue: 'q' };
const runtimes = defineRollups(
  parseConfig({
    rollups: [
      { id: 'buckets', upstream: 'offsets', every: 1000, begin: 0, target },
      { id: 'hourly', upstream: 'orders', every: 'hour', begin: '2000-01-01', target },
      { id: 'minutely', upstream: ['orders', 'other'], every: 'minute', begin: '2000-01-01', target },
    ],
  }),
);
const rollups = runtimes.map((r) => r.rollup);
const options: NormalizeOptions = { maxPayloadBytes: 65_536, readersOf: readersOf(() => runtimes) };

function refusal(raw: Record<string, unknown>): BadInputError {
  try {
    normalizeEvent(raw, options);
  } catch (error) {
    if (error instanceof BadInputError) return error;
    throw error;
  }
  throw new Error('the event was accepted');
}

describe('the bound on the periods one event touches', () => {
  it('refuses an event over billions of periods of a rollup reading its asset, naming it and saying to split', () => {
    const error = refusal({ asset: 'offsets', start: 311, end: 8_700_000_000_000 });
    expect(error.reason).toBe('too_many_periods');
    expect(error.message).toBe(
      'the event [311, 8700000000000) touches 8700000000 periods of rollup buckets (every 1000); an event may touch at most 1000000 periods of each rollup reading its asset: split it into smaller events',
    );
  });

  it('names the rollup the event overflows (the minutely one, not the hourly one), from its begin on', () => {
    const error = refusal({ asset: 'orders', start: '1970-01-01T00:00:00Z', end: '2050-01-01T00:00:00Z' });
    expect(error.reason).toBe('too_many_periods');
    expect(error.message).toContain('of rollup minutely (every minute)');
    // Counted from the rollup's begin: 50 years of minutes (18,263 days), not 80.
    expect(error.message).toContain('touches 26298720 periods');
  });

  it('accepts a multi-year backfill of an hourly rollup in one event, and the exact bound', () => {
    expect(() =>
      normalizeEvent(
        { asset: 'hourly-only', start: '2000-01-01T00:00:00Z', end: '2100-01-01T00:00:00Z' },
        options,
      ),
    ).not.toThrow();
    const hourlyOnly = rollups.filter((r) => r.id === 'hourly');
    const event = (end: number) => ({
      asset: 'orders',
      domain: 'integer' as const,
      start: { domain: 'integer' as const, value: 0, text: '0' },
      end: { domain: 'integer' as const, value: end, text: String(end) },
    });
    const buckets = rollups.filter((r) => r.id === 'buckets').map((r) => ({ ...r, upstream: ['orders'] }));
    expect(() => checkPeriodBound(event(MAX_PERIODS_PER_EVENT * 1000), buckets)).not.toThrow();
    expect(() => checkPeriodBound(event(MAX_PERIODS_PER_EVENT * 1000 + 1), buckets)).toThrow(BadInputError);
    // A rollup in the other domain, or not reading the asset, does not count.
    expect(() => checkPeriodBound(event(Number.MAX_SAFE_INTEGER), hourlyOnly)).not.toThrow();
  });

  it('passes any event when no rollup reads its asset, or when no rollups are given', () => {
    expect(() =>
      normalizeEvent({ asset: 'unread', start: 0, end: 9_000_000_000_000_000 }, options),
    ).not.toThrow();
    expect(() =>
      normalizeEvent({ asset: 'offsets', start: 0, end: 9_000_000_000_000_000 }, { maxPayloadBytes: 65_536 }),
    ).not.toThrow();
  });
});
