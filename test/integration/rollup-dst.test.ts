import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// Europe/Berlin in 2025: 2025-03-30 has 23 hours (02:00 CET jumps to 03:00 CEST at 01:00Z),
// 2025-10-26 has 25 hours (03:00 CEST falls back to 02:00 CET at 01:00Z).
const ASSET = 'berlin.events';
const db = await createTestDatabase();
const prefix = createTestPrefix();
const target = { type: 'queue', queue: 'dst-runs' };
const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'berlin_daily',
      upstream: [ASSET],
      every: 'day',
      timezone: 'Europe/Berlin',
      begin: '2025-03-28',
      target,
    },
    {
      id: 'berlin_hourly',
      upstream: [ASSET],
      every: 'hour',
      timezone: 'Europe/Berlin',
      begin: '2025-03-29',
      target,
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const downstream = testQueue('dst-runs', prefix, config);

const HOUR_MS = 3_600_000;
/** One-hour completions covering [from, from + hours h), as UTC instants. */
function hourly(fromUtc: string, hours: number) {
  const from = Date.parse(fromUtc);
  return Array.from({ length: hours }, (_, i) => ({
    name: 'e',
    data: {
      asset: ASSET,
      start: new Date(from + i * HOUR_MS).toISOString(),
      end: new Date(from + (i + 1) * HOUR_MS).toISOString(),
      version: 'v1',
      id: `h-${from + i * HOUR_MS}`,
    },
  }));
}

interface TriggerRow {
  period_lo: number;
  generation: number;
  idempotency_key: string;
  reason: string;
  payload: { period: { start: string; end: string; key: string } };
}
const triggersOf = (rollup: string) =>
  db.sql<TriggerRow[]>`
    select period_lo, generation, idempotency_key, reason, payload from triggers
    where rollup_id = ${rollup} order by period_lo, generation`;

// Local hours of 2025-10-26 in Berlin: the repeated 02:00 is two periods, the second keyed with its offset.
const OCTOBER_26 = [
  ['2025-10-26T00', '2025-10-26T00:00:00+02:00', '2025-10-26T01:00:00+02:00', '20251025T220000Z'],
  ['2025-10-26T01', '2025-10-26T01:00:00+02:00', '2025-10-26T02:00:00+02:00', '20251025T230000Z'],
  ['2025-10-26T02', '2025-10-26T02:00:00+02:00', '2025-10-26T02:00:00+01:00', '20251026T000000Z'],
  ['2025-10-26T02+01:00', '2025-10-26T02:00:00+01:00', '2025-10-26T03:00:00+01:00', '20251026T010000Z'],
  ...Array.from({ length: 21 }, (_, i) => {
    const h = i + 3;
    const hh = String(h).padStart(2, '0');
    const next = h === 23 ? '2025-10-27T00' : `2025-10-26T${String(h + 1).padStart(2, '0')}`;
    const utc = new Date(Date.parse('2025-10-26T02:00:00Z') + i * HOUR_MS).toISOString();
    return [
      `2025-10-26T${hh}`,
      `2025-10-26T${hh}:00:00+01:00`,
      `${next}:00:00+01:00`,
      utc.slice(0, 19).replace(/[-:]/g, '') + 'Z',
    ];
  }),
] as const;

describe('Europe/Berlin across the DST changes of 2025', () => {
  it('the 23-hour day 2025-03-30 triggers exactly once with DST-correct bounds', async () => {
    // Exactly the 23 hours of the local day: a 24-hour idea of the day would never be covered.
    await producer.addBulk(hourly('2025-03-29T23:00:00Z', 23));
    const job = await waitFor(() => downstream.getJob('berlin_daily@20250329T230000Z#1'), {
      what: 'daily trigger of 2025-03-30',
    });
    expect(job.data).toMatchObject({
      rollup: 'berlin_daily',
      idempotency_key: 'berlin_daily@20250329T230000Z#1',
      generation: 1,
      reason: 'covered',
      period: { start: '2025-03-30T00:00:00+01:00', end: '2025-03-31T00:00:00+02:00', key: '2025-03-30' },
      upstreams: { [ASSET]: { ratio: 1, missing: [], replay_required: [], versions: ['v1'] } },
    });
    // The 23 hourly periods of that day trigger too, each once; there is no 02:00.
    const hours = await waitFor(
      async () => {
        const rows = (await triggersOf('berlin_hourly')).filter((t) =>
          t.payload.period.key.startsWith('2025-03-30'),
        );
        return rows.length === 23 ? rows : undefined;
      },
      { what: '23 hourly triggers of 2025-03-30' },
    );
    expect(hours.map((t) => t.payload.period.key)).toEqual(
      [0, 1, ...Array.from({ length: 21 }, (_, i) => i + 3)].map(
        (h) => `2025-03-30T${String(h).padStart(2, '0')}`,
      ),
    );
    expect(hours[1]!.payload.period).toEqual({
      start: '2025-03-30T01:00:00+01:00',
      end: '2025-03-30T03:00:00+02:00',
      key: '2025-03-30T01',
    });
    expect(hours[2]!.payload.period).toEqual({
      start: '2025-03-30T03:00:00+02:00',
      end: '2025-03-30T04:00:00+02:00',
      key: '2025-03-30T03',
    });
  });

  it('the 25-hour day 2025-10-26 triggers exactly once, and each of its 25 hours once', async () => {
    await producer.addBulk(hourly('2025-10-25T22:00:00Z', 25));
    const job = await waitFor(() => downstream.getJob('berlin_daily@20251025T220000Z#1'), {
      what: 'daily trigger of 2025-10-26',
    });
    expect(job.data).toMatchObject({
      rollup: 'berlin_daily',
      generation: 1,
      reason: 'covered',
      period: { start: '2025-10-26T00:00:00+02:00', end: '2025-10-27T00:00:00+01:00', key: '2025-10-26' },
      upstreams: { [ASSET]: { ratio: 1, missing: [] } },
    });

    const jobs = await waitFor(
      async () => {
        const found = await Promise.all(
          OCTOBER_26.map(([, , , utc]) => downstream.getJob(`berlin_hourly@${utc}#1`)),
        );
        return found.every((j) => j !== undefined) ? found : undefined;
      },
      { what: 'the 25 hourly jobs of 2025-10-26' },
    );
    expect(jobs.map((j) => j!.data.period)).toEqual(
      OCTOBER_26.map(([key, start, end]) => ({ start, end, key })),
    );
    expect(new Set(jobs.map((j) => j!.data.reason))).toEqual(new Set(['covered']));

    // Exactly one decision per day and per hour: nothing for the neighbouring days.
    const daily = await triggersOf('berlin_daily');
    expect(daily.map((t) => [t.payload.period.key, t.generation, t.idempotency_key])).toEqual([
      ['2025-03-30', 1, 'berlin_daily@20250329T230000Z#1'],
      ['2025-10-26', 1, 'berlin_daily@20251025T220000Z#1'],
    ]);
    const hourlyRows = await triggersOf('berlin_hourly');
    expect(hourlyRows).toHaveLength(23 + 25);
    expect(hourlyRows.every((t) => t.generation === 1)).toBe(true);
    expect(
      hourlyRows
        .filter((t) => t.payload.period.key.startsWith('2025-10-26'))
        .map((t) => t.payload.period.key),
    ).toEqual(OCTOBER_26.map(([key]) => key));

    // The period listing agrees, queried with local bounds of the 25-hour day.
    const response = await daemon.http.inject({
      url: `/v1/rollups/berlin_hourly/periods?start=${encodeURIComponent('2025-10-26T00:00:00+02:00')}&end=${encodeURIComponent('2025-10-27T00:00:00+01:00')}`,
    });
    expect(response.statusCode).toBe(200);
    const { periods } = response.json() as {
      periods: Array<{ key: string; start: string; end: string; state: string; generation: number }>;
    };
    expect(periods.map((p) => [p.key, p.start, p.end, p.state, p.generation])).toEqual(
      OCTOBER_26.map(([key, start, end]) => [key, start, end, 'triggered', 1]),
    );
  });
});
