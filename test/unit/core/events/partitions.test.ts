import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  parsePartitionName,
  partitionName,
  partitionsToCreate,
  pastRetention,
} from '../../../../src/core/events/partitions.js';

describe('event log partitions', () => {
  it('names carry their bounds', () => {
    expect(parsePartitionName(partitionName(86_400, 172_800))).toEqual({
      name: 'events_p86400_172800',
      lo: 86_400,
      hi: 172_800,
    });
    expect(parsePartitionName('events_default')).toBeNull();
    expect(parsePartitionName('events_p1_2_old')).toBeNull();
  });

  it('a new log gets the current grid step and enough after it', () => {
    expect(partitionsToCreate([], { widthSeconds: 10, aheadSeconds: 15, nowSeconds: 103 })).toEqual([
      [100, 110],
      [110, 120],
    ]);
  });

  it('after a long stop, one catch-up partition spans the gap instead of one per missed step', () => {
    expect(partitionsToCreate([50], { widthSeconds: 10, aheadSeconds: 5, nowSeconds: 1003 })).toEqual([
      [50, 1000],
      [1000, 1010],
    ]);
  });

  it('plans nothing when partitions already reach far enough', () => {
    expect(partitionsToCreate([200], { widthSeconds: 10, aheadSeconds: 20, nowSeconds: 100 })).toEqual([]);
  });

  it('refuses a width that is not a whole number of seconds', () => {
    expect(() => partitionsToCreate([], { widthSeconds: 0.5, aheadSeconds: 0, nowSeconds: 0 })).toThrow(
      RangeError,
    );
  });

  it('the plan continues the newest partition without gaps or overlaps, reaches past now + ahead, and each partition ends on the grid', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 0, max: 50 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.option(fc.integer({ min: 1, max: 20_000_000 }), { nil: undefined }),
        (width, now, steps, extra, newest) => {
          const ahead = steps * width + (extra % width);
          const existing = newest === undefined ? [] : [newest];
          const plan = partitionsToCreate(existing, {
            widthSeconds: width,
            aheadSeconds: ahead,
            nowSeconds: now,
          });
          const reach = Math.max(newest ?? Number.NEGATIVE_INFINITY, ...plan.map(([, hi]) => hi));
          expect(reach).toBeGreaterThan(now + ahead);
          if (newest !== undefined && newest > now + ahead) expect(plan).toEqual([]);
          let from = newest ?? plan[0]?.[0];
          for (const [lo, hi] of plan) {
            expect(lo).toBe(from);
            expect(hi).toBeGreaterThan(lo);
            expect(hi % width).toBe(0);
            from = hi;
          }
          // The partition holding `now` exists (ingest writes there) unless the log already reaches past it.
          if (newest === undefined || newest <= now) {
            expect(plan.some(([lo, hi]) => lo <= now && now < hi)).toBe(true);
          }
        },
      ),
    );
  });

  it('a partition is past retention once its end is older than the window', () => {
    const p = { name: 'events_p0_100', lo: 0, hi: 100 };
    expect(pastRetention(p, 30, 129)).toBe(false);
    expect(pastRetention(p, 30, 130)).toBe(true);
  });
});
