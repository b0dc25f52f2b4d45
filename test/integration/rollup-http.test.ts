import { describe, expect, it, onTestFinished } from 'vitest';
import type { TriggerPayload } from '../../src/core/trigger.js';
import { queueConnection } from '../../src/queue/backend.js';
import { queueTarget } from '../../src/targets/queue.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'q_hourly',
      upstream: ['h.orders'],
      every: 'hour',
      timezone: 'Europe/Berlin',
      begin: '2026-11-02',
      policy: { ratio: 0.5, settle: 'PT0S' },
      rerun: 'on_update',
      target: { type: 'queue', queue: 'runs' },
    },
    {
      id: 'q_daily',
      upstream: ['h.orders', 'h.payments'],
      every: 'day',
      timezone: 'UTC',
      begin: '2026-11-02',
      target: { type: 'queue', queue: 'runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const runs = testQueue('runs', prefix, config);
const dedupe = testQueue('dedupe-runs', prefix, config);

const auth = { authorization: `Bearer ${TEST_TOKEN}` };
const lo = (iso: string) => Date.parse(iso) * 1000;
// 2026-11-02T11:00 in Berlin is 10:00Z.
const H11 = '2026-11-02T10:00:00Z';
const triggersOf = (rollup: string, start: string) =>
  db.sql<
    {
      generation: number;
      reason: string;
      idempotency_key: string;
      decided_at: Date;
      payload: TriggerPayload;
    }[]
  >`
    select generation, reason, idempotency_key, decided_at, payload from triggers
    where rollup_id = ${rollup} and period_lo = ${lo(start)} order by generation`;
const untilGeneration = (rollup: string, start: string, generation: number) =>
  waitFor(
    async () => {
      const rows = await triggersOf(rollup, start);
      return rows.length >= generation ? rows : undefined;
    },
    { what: `${rollup} ${start} generation ${generation}` },
  );

describe('queue target', () => {
  it('adds a job whose id is the idempotency key and whose data is exactly the documented payload', async () => {
    await producer.add('e', { asset: 'h.orders', start: H11, end: '2026-11-02T11:00:00Z', version: 'v7' });
    const [trigger] = await untilGeneration('q_hourly', H11, 1);
    const key = 'q_hourly@20261102T100000Z#1';
    expect(trigger!.idempotency_key).toBe(key);
    const job = await waitFor(() => runs.getJob(key), { what: 'job' });
    expect(job.id).toBe(key);
    expect(job.name).toBe('q_hourly');
    expect(job.data).toEqual({
      rollup: 'q_hourly',
      idempotency_key: key,
      generation: 1,
      reason: 'covered',
      period: { start: '2026-11-02T11:00:00+01:00', end: '2026-11-02T12:00:00+01:00', key: '2026-11-02T11' },
      upstreams: { 'h.orders': { ratio: 1, missing: [], replay_required: [], versions: ['v7'] } },
      decided_at: trigger!.decided_at.toISOString(),
      attempt: 1,
      run_id: key,
    });
    expect(job.data).toEqual(trigger!.payload);
  });

  it('delivering the same payload again leaves one job (BullMQ deduplicates on the job id)', async () => {
    const connection = queueConnection(config);
    const target = queueTarget(connection, 'dedupe-runs', prefix);
    onTestFinished(async () => {
      await target.close();
      await connection.close();
    });
    const [trigger] = await triggersOf('q_hourly', H11);
    expect(await target.deliver(trigger!.payload)).toEqual({ ok: true });
    expect(await target.deliver(trigger!.payload)).toEqual({ ok: true });
    const counts = await dedupe.getJobCounts();
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(1);
  });
});

describe('manual re-trigger', () => {
  const url = (start: string) => `/v1/rollups/q_hourly/periods/${encodeURIComponent(start)}/trigger`;
  /** A manual trigger of the q_hourly period containing `start`, with the write token. */
  const manual = (start: string) => daemon.http.inject({ method: 'POST', url: url(start), headers: auth });

  it('without a token answers 401 (403 with a wrong one) and decides nothing', async () => {
    const none = await daemon.http.inject({ method: 'POST', url: url('2026-11-02T11:00:00+01:00') });
    expect(none.statusCode).toBe(401);
    const wrong = await daemon.http.inject({
      method: 'POST',
      url: url('2026-11-02T11:00:00+01:00'),
      headers: { authorization: 'Bearer not-the-token-0123456789' },
    });
    expect(wrong.statusCode).toBe(403);
    const [period] =
      await db.sql`select generation, manual_requested from periods where rollup_id = 'q_hourly' and lo = ${lo(H11)}`;
    expect(period).toEqual({ generation: 1, manual_requested: false });
  });

  it('with the bearer token triggers generation + 1 with reason manual', async () => {
    const response = await manual('2026-11-02T11:00:00+01:00');
    expect(response.statusCode).toBe(202);
    expect(response.json()).toEqual({
      rollup: 'q_hourly',
      period: { start: '2026-11-02T11:00:00+01:00', end: '2026-11-02T12:00:00+01:00', key: '2026-11-02T11' },
      requested: true,
    });
    const rows = await untilGeneration('q_hourly', H11, 2);
    expect(rows.map((r) => [r.generation, r.reason, r.idempotency_key])).toEqual([
      [1, 'covered', 'q_hourly@20261102T100000Z#1'],
      [2, 'manual', 'q_hourly@20261102T100000Z#2'],
    ]);
    const job = await waitFor(() => runs.getJob('q_hourly@20261102T100000Z#2'), { what: 'manual job' });
    expect(job.data).toMatchObject({ generation: 2, reason: 'manual' });
    const [period] = await db.sql`
      select state, generation, reason, manual_requested from periods where rollup_id = 'q_hourly' and lo = ${lo(H11)}`;
    expect(period).toEqual({ state: 'triggered', generation: 2, reason: 'manual', manual_requested: false });
  });

  it('triggers a period nothing covered yet (any point inside it names it), with the whole period missing', async () => {
    const response = await manual('2026-11-02T14:30:00+01:00');
    expect(response.statusCode).toBe(202);
    expect(response.json().period.key).toBe('2026-11-02T14');
    const [trigger] = await untilGeneration('q_hourly', '2026-11-02T13:00:00Z', 1);
    expect(trigger).toMatchObject({ generation: 1, reason: 'manual' });
    expect(trigger!.payload.upstreams['h.orders']).toEqual({
      ratio: 0,
      missing: [{ start: '2026-11-02T13:00:00Z', end: '2026-11-02T14:00:00Z' }],
      replay_required: [],
      versions: [],
    });
  });

  it('takes the period key too, as the detail and /retry do', async () => {
    const response = await manual('2026-11-02T14');
    expect(response.statusCode).toBe(202);
    expect(response.json().period).toEqual({
      start: '2026-11-02T14:00:00+01:00',
      end: '2026-11-02T15:00:00+01:00',
      key: '2026-11-02T14',
    });
    const rows = await untilGeneration('q_hourly', '2026-11-02T13:00:00Z', 2);
    expect(rows.map((r) => [r.generation, r.reason])).toEqual([
      [1, 'manual'],
      [2, 'manual'],
    ]);
  });

  it('refuses unknown rollups (404), periods before begin and bad bounds (400)', async () => {
    const unknown = await daemon.http.inject({
      method: 'POST',
      url: '/v1/rollups/nope/periods/2026-11-02T11:00:00Z/trigger',
      headers: auth,
    });
    expect(unknown.statusCode).toBe(404);
    const early = await manual('2026-11-01T23:00:00+01:00');
    expect(early.statusCode).toBe(400);
    const bad = await manual('yesterday');
    expect(bad.statusCode).toBe(400);
    const future = await manual(new Date(Date.now() + 2 * 86_400_000).toISOString());
    expect(future.statusCode).toBe(400);
    expect(future.json()).toEqual({
      code: 'out_of_range',
      message: expect.stringContaining('has not begun'),
    });
  });
});

describe('listings', () => {
  it('GET /v1/rollups lists each rollup with its definition and period counts by state', async () => {
    const response = await daemon.http.inject({ url: '/v1/rollups' });
    expect(response.statusCode).toBe(200);
    const { rollups } = response.json() as { rollups: Array<Record<string, unknown>> };
    expect(rollups.map((r) => r.id)).toEqual(['q_hourly', 'q_daily']);
    const [hourly, daily] = rollups;
    expect(hourly).toMatchObject({
      id: 'q_hourly',
      upstream: ['h.orders'],
      every: 'hour',
      timezone: 'Europe/Berlin',
      begin: '2026-11-02T00:00:00+01:00',
      rerun: 'on_update',
      target: { type: 'queue' },
    });
    // Durations as config spells them (ISO 8601), not in ms.
    expect(hourly!.policy).toEqual({ ratio: 0.5, settle: 'PT0S', on_deadline: 'trigger' });
    expect(daily).toMatchObject({
      id: 'q_daily',
      upstream: ['h.orders', 'h.payments'],
      begin: '2026-11-02T00:00:00Z',
    });
    const periods = hourly!.periods as Record<string, number>;
    expect(Object.keys(periods).sort()).toEqual([
      'missed',
      'rerun_pending',
      'settling',
      'triggered',
      'waiting',
    ]);
    expect(periods.triggered).toBe(2);
    // Every hour since begin (in Berlin, 2026-11-01T23:00Z) up to the current one exists, stored
    // or derived: the untouched ones are waiting.
    const hours = Math.floor((Date.now() - Date.parse('2026-11-01T23:00:00Z')) / 3_600_000) + 1;
    const total = Object.values(periods).reduce((a, b) => a + b, 0);
    expect(Math.abs(total - hours)).toBeLessThanOrEqual(1); // an hour may turn meanwhile
    expect(periods.waiting).toBe(total - periods.triggered! - periods.settling! - periods.rerun_pending!);
    expect(periods.missed).toBe(0);
  });

  it('GET /v1/rollups/{id}/periods filters by start, end and state', async () => {
    const q = (query: string) => daemon.http.inject({ url: `/v1/rollups/q_hourly/periods?${query}` });
    const window = `start=${encodeURIComponent('2026-11-02T10:30:00+01:00')}&end=${encodeURIComponent('2026-11-02T15:00:00+01:00')}`;
    const all = await q(window);
    expect(all.statusCode).toBe(200);
    const { periods } = all.json() as { periods: Array<Record<string, unknown>> };
    expect(periods.map((p) => p.key)).toEqual([
      '2026-11-02T10',
      '2026-11-02T11',
      '2026-11-02T12',
      '2026-11-02T13',
      '2026-11-02T14',
    ]);
    expect(periods[1]).toEqual({
      start: '2026-11-02T11:00:00+01:00',
      end: '2026-11-02T12:00:00+01:00',
      key: '2026-11-02T11',
      state: 'triggered',
      ratio: 1,
      ratios: { 'h.orders': 1 },
      generation: 2,
      reason: 'manual',
      triggered_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      run: expect.objectContaining({ generation: 2, attempt: 1, run_id: 'q_hourly@20261102T100000Z#2' }),
    });
    expect(periods[0]).toMatchObject({
      state: 'waiting',
      ratio: 0,
      generation: 0,
      reason: null,
      triggered_at: null,
      run: null,
    });
    const [latest] = await triggersOf('q_hourly', H11).then((rows) => rows.slice(-1));
    expect(periods[1]!.triggered_at).toBe(latest!.decided_at.toISOString());

    const triggered = await q(`${window}&state=triggered`);
    expect((triggered.json().periods as Array<{ key: string }>).map((p) => p.key)).toEqual([
      '2026-11-02T11',
      '2026-11-02T14',
    ]);
    expect((await q(`${window}&state=bogus`)).statusCode).toBe(400);
    expect((await q('start=not-a-time')).statusCode).toBe(400);
    const reversed = await q('start=2026-11-03T00:00:00Z&end=2026-11-02T00:00:00Z');
    expect(reversed.json()).toMatchObject({ code: 'end_before_start' });
    // Half-open: the latest 500 from start on (the hours since 2026-11-02 are more than that).
    const since = (await q('start=2026-11-02T00:00:00Z')).json().periods as Array<{ start: string }>;
    expect(since).toHaveLength(500);
    expect(Date.parse(since[499]!.start)).toBeGreaterThan(Date.now() - 2 * 3600_000);
    expect((await daemon.http.inject({ url: '/v1/rollups/nope/periods' })).statusCode).toBe(404);
  });
});
