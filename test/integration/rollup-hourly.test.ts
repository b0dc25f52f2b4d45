import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'orders_hourly',
      upstream: ['warehouse.orders'],
      every: 'hour',
      timezone: 'Europe/Berlin',
      begin: '2025-06-01T00:00:00',
      target: { type: 'queue', queue: 'downstream-runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const downstream = testQueue('downstream-runs', prefix, config);

const slice = (h: number, m: number) => {
  const at = (mm: number) => `2025-06-01T${String(h).padStart(2, '0')}:${String(mm).padStart(2, '0')}:00Z`;
  return {
    asset: 'warehouse.orders',
    start: at(m),
    end: m + 5 === 60 ? `2025-06-01T${String(h + 1).padStart(2, '0')}:00:00Z` : at(m + 5),
    version: 'v1',
  };
};

describe('hourly rollup from 5-minute slices', () => {
  it('triggers an hour once its twelve slices arrive, exactly once', async () => {
    await producer.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: 'e', data: slice(8, i * 5) })));
    const job = await waitFor(async () => downstream.getJob('orders_hourly@20250601T080000Z#1'), {
      what: 'trigger job',
    });
    expect(job.data).toMatchObject({
      rollup: 'orders_hourly',
      idempotency_key: 'orders_hourly@20250601T080000Z#1',
      generation: 1,
      reason: 'covered',
      period: { start: '2025-06-01T10:00:00+02:00', end: '2025-06-01T11:00:00+02:00', key: '2025-06-01T10' },
      upstreams: { 'warehouse.orders': { ratio: 1, missing: [], replay_required: [], versions: ['v1'] } },
    });
    const response = await daemon.http.inject({
      url: '/v1/rollups/orders_hourly/periods?start=2025-06-01T10:00:00%2B02:00&end=2025-06-01T12:00:00%2B02:00',
    });
    const { periods } = response.json();
    expect(
      periods.map((p: { key: string; state: string; generation: number }) => [p.key, p.state, p.generation]),
    ).toEqual([
      ['2025-06-01T10', 'triggered', 1],
      ['2025-06-01T11', 'waiting', 0],
    ]);
    const decisions = await db.sql`select count(*)::int as n from triggers`;
    expect(decisions[0]!.n).toBe(1);
  });
});
