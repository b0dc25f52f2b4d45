/** What an evaluation decides for claimed periods (core/periods/decisions.ts), without a database. */
import { describe, expect, it } from 'vitest';
import { type ClaimedFacts, decideAll } from '../../../../src/core/periods/decisions.js';
import type { Upstream } from '../../../../src/core/periods/upstream-facts.js';
import { defineRollup } from '../../../../src/core/rollups/rollup.js';

const HOUR_US = 3_600_000_000;
const t = (iso: string) => Date.parse(iso) * 1000;
const rollup = defineRollup({
  id: 'orders_hourly',
  upstream: ['orders', 'payments'],
  every: 'hour',
  timezone: 'UTC',
  begin: '2025-06-01T00:00:00Z',
  policy: { settle: 0, on_deadline: 'miss', deadline: 2 * 3_600_000 },
  rerun: 'on_replay',
});
const claimed = (start: string, generation = 0): ClaimedFacts => ({
  lo: t(start),
  hi: t(start) + HOUR_US,
  key: start.slice(0, 13),
  state: generation > 0 ? 'rerun_pending' : 'waiting',
  generation,
  satisfiedSince: null,
  lastChangeAt: new Date('2025-06-01T03:00:00Z'),
  rerun: generation > 0 ? 'replay' : null,
  manualRequested: false,
});
const covering = (start: string, end: string, lastSeq: number): Upstream => ({
  domain: 'time',
  lastSeq,
  extent: { start: t(start), end: t(end) },
  segments: [{ start: t(start), end: t(end), state: 'complete', version: 'v1', requiredVersion: null }],
});

describe('decideAll', () => {
  const upstreams = new Map([
    ['orders', covering('2025-06-01T00:00:00Z', '2025-06-01T02:00:00Z', 7)],
    ['payments', covering('2025-06-01T00:00:00Z', '2025-06-01T01:30:00Z', 3)],
  ]);
  const now = new Date('2025-06-01T03:00:05Z');

  it('triggers a covered period as its next generation, with the log positions it saw and its latency', () => {
    const { updates, triggers, latencies } = decideAll(
      rollup,
      [claimed('2025-06-01T00:00:00Z', 1)],
      upstreams,
      now,
    );
    expect(updates).toEqual([
      {
        lo: t('2025-06-01T00:00:00Z'),
        oldGeneration: 1,
        generation: 2,
        state: 'triggered',
        reason: 'replay',
        ratio: 1,
        ratios: { orders: 1, payments: 1 },
        satisfiedSince: null,
        dueAt: null,
        seqs: { orders: 7, payments: 3 },
      },
    ]);
    expect(triggers).toMatchObject([
      {
        lo: t('2025-06-01T00:00:00Z'),
        generation: 2,
        key: 'orders_hourly@20250601T000000Z#2',
        reason: 'replay',
      },
    ]);
    expect(triggers[0]!.payload).toMatchObject({ rollup: 'orders_hourly', generation: 2, reason: 'replay' });
    expect(latencies).toEqual([5]);
  });

  it('keeps a partly covered period waiting, and misses one past its deadline', () => {
    const { updates, triggers, latencies } = decideAll(
      rollup,
      [claimed('2025-06-01T01:00:00Z'), claimed('2025-06-01T00:00:00Z')],
      new Map([['orders', upstreams.get('orders')!]]),
      now,
    );
    expect(updates.map((u) => [u.state, u.ratio, u.generation, u.seqs])).toEqual([
      ['waiting', 0, 0, null],
      ['missed', 0, 0, null],
    ]);
    expect(updates[0]!.ratios).toEqual({ orders: 1, payments: 0 });
    expect(triggers).toEqual([]);
    expect(latencies).toEqual([]);
  });
});
