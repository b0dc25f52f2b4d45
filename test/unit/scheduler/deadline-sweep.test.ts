import { describe, expect, it } from 'vitest';
import { defineRollup } from '../../../src/core/rollups/rollup.js';
import type { Metrics } from '../../../src/metrics/registry.js';
import { DeadlineSweep } from '../../../src/scheduler/deadline-sweep.js';
import type { Sql } from '../../../src/store/pg/db.js';
import type { Logger } from '../../../src/support/log.js';

const rollup = (deadline?: number) =>
  defineRollup({
    id: 'r',
    upstream: ['a'],
    every: 'hour',
    timezone: 'UTC',
    begin: '2025-03-01T00:00:00Z',
    policy: { settle: 0, on_deadline: 'trigger', deadline },
    rerun: 'never',
  });
// A rollup without a deadline never reaches the database, the log or the metrics.
const unused = {} as Sql & Logger & Metrics;

describe('DeadlineSweep.wakeAt, which the scheduler sleeps by', () => {
  it('is never (+Infinity) for a rollup without a deadline, before and after a run', async () => {
    const sweep = new DeadlineSweep(rollup());
    expect(sweep.wakeAt).toBe(Number.POSITIVE_INFINITY);
    expect(await sweep.run(unused, Date.parse('2025-06-01T10:00:00Z'), 10, unused, unused)).toEqual({
      owed: [],
      more: false,
    });
    expect(sweep.wakeAt).toBe(Number.POSITIVE_INFINITY);
  });

  it('is due at once on a new lease for a rollup with a deadline, then at the next deadline', async () => {
    const sweep = new DeadlineSweep(rollup(2 * 3_600_000));
    expect(sweep.wakeAt).toBe(Number.NEGATIVE_INFINITY);
    const now = Date.parse('2025-03-01T05:30:00Z');
    const { owed } = await sweep.run(unused, now, 1000, unused, unused);
    // Hours 00..02 are past their 2-hour deadline at 05:30 (newest first; starts in microseconds);
    // 03:00 is next, at 06:00.
    expect(owed.map((p) => new Date(p.start / 1000).toISOString())).toEqual([
      '2025-03-01T02:00:00.000Z',
      '2025-03-01T01:00:00.000Z',
      '2025-03-01T00:00:00.000Z',
    ]);
    expect(sweep.wakeAt).toBe(Date.parse('2025-03-01T06:00:00Z'));
  });
});
