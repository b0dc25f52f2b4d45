/**
 * Repair requests across a restart: a daemon that stopped after delivering an attempt
 * but before recording it (the outbox row still due, as after a kill) leaves exactly one job per
 * attempt at the target once the next leader delivers it again, and the next leader's fresh scan
 * makes no second request for the same range. Also: a replay requirement over a triggered period
 * is requested as `replay_required` at its version, and a completion at that version repairs it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { formatTime } from '../../src/core/intervals/bounds.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { LOADED_DEADLINE_MS, waitFor } from '../helpers/wait.js';

const PERIOD_MS = 2000;
const begin = Math.ceil((Date.now() + 3000) / PERIOD_MS) * PERIOD_MS;
const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'rr',
      upstream: ['rr.a'],
      every: 'PT2S',
      begin: new Date(begin).toISOString(),
      target: { type: 'queue', queue: 'rr-runs' },
      // One attempt an hour: nothing is re-sent while the test runs.
      repair: { after: 'PT1S', every: 'PT1H', target: { type: 'queue', queue: 'rr-repairs' } },
    },
    {
      // Hourly: its next period passes `after` only at the top of the hour; a replay requirement
      // is asked for by the scan its commit notification wakes (at most 15 s after the last one).
      id: 'rr_hourly',
      upstream: ['rr.hourly'],
      every: 'hour',
      begin: new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3 * 3_600_000).toISOString(),
      rerun: 'on_replay',
      target: { type: 'queue', queue: 'rr-runs' },
      repair: { after: 'PT1S', every: 'PT1H', target: { type: 'queue', queue: 'rr-repairs' } },
    },
    {
      id: 'rr_replay',
      upstream: ['rr.replay'],
      every: 'PT2S',
      begin: new Date(begin).toISOString(),
      rerun: 'on_replay',
      target: { type: 'queue', queue: 'rr-runs' },
      repair: { after: 'PT1S', every: 'PT1H', target: { type: 'queue', queue: 'rr-repairs' } },
    },
  ],
});
const producer = testProducer(config);
const repairs = testQueue('rr-repairs', prefix, config);
const runs = testQueue('rr-runs', prefix, config);
const iso = (ms: number) => formatTime(ms * 1000);
const upcomingPeriod = () => {
  const start = Math.max(begin, Math.ceil((Date.now() + 1000) / PERIOD_MS) * PERIOD_MS);
  return { start, end: start + PERIOD_MS };
};
const requestsOf = (rollupId: string, lo: number) =>
  db.sql<{ id: number; state: string; attempt: number; ranges: unknown }[]>`
    select id, state, attempt, ranges from repair_requests where rollup_id = ${rollupId} and period_lo = ${lo * 1000}`;

let running: Daemon | undefined;
afterAll(() => running?.stop());
const start = async () => {
  running = await startDaemon(config, createLogger(config.log_level));
  return running;
};

describe('repair requests across a restart', () => {
  it('delivers an attempt again under the same key after a restart: one job per attempt, one request per range', async () => {
    const first = await start();
    const p = upcomingPeriod();
    await producer.add('e', {
      asset: 'rr.a',
      start: iso(p.start),
      end: iso(p.start + 1000),
      version: 'v1',
      id: 'rr-1',
    });
    const [request] = await waitFor(
      async () => {
        const rows = await requestsOf('rr', p.start);
        return rows.length > 0 ? rows : undefined;
      },
      { what: 'the request', timeout: LOADED_DEADLINE_MS },
    );
    const key = `repair-${request!.id}~a1`;
    await waitFor(() => repairs.getJob(key), { what: key });
    await waitFor(
      async () =>
        (
          await db.sql`select 1 from repair_attempts where idempotency_key = ${key} and delivered_at is not null`
        ).length > 0,
      { what: 'delivery recorded' },
    );
    await first.stop();
    running = undefined;
    // As if the process died after the target accepted the job and before the outbox recorded it.
    await db.sql`update repair_attempts set delivered_at = null, due_at = now() where idempotency_key = ${key}`;

    await start();
    await waitFor(
      async () => {
        const [row] = await db.sql<{ deliveries: number; delivered_at: Date | null }[]>`
          select deliveries, delivered_at from repair_attempts where idempotency_key = ${key}`;
        return row?.delivered_at !== null && row!.deliveries === 2;
      },
      { what: 'delivered again by the next leader' },
    );
    const jobs = (await repairs.getJobs(['waiting', 'active', 'completed', 'failed', 'delayed'])).filter(
      (j) => j.id?.startsWith(`repair-${request!.id}~`),
    );
    expect(jobs.map((j) => j.id)).toEqual([key]);
    // The new leader scanned afresh (a scan precedes delivery in its pass) and made no second request.
    const rows = await requestsOf('rr', p.start);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: request!.id, state: 'open', attempt: 1 });
  });

  it('asks for a replay requirement over a triggered period at its version, and a completion at it repairs the request', async () => {
    running ??= await start();
    const p = upcomingPeriod();
    await producer.add('e', {
      asset: 'rr.replay',
      start: iso(p.start),
      end: iso(p.end),
      version: 'v1',
      id: 'rp-1',
    });
    await waitFor(
      async () =>
        (await runs.getJobs(['waiting', 'active', 'completed', 'delayed'])).find(
          (j) => j.data.rollup === 'rr_replay' && j.data.period.start === iso(p.start),
        ),
      { what: 'the first trigger', timeout: LOADED_DEADLINE_MS },
    );
    await producer.add('e', {
      type: 'replay_requirement',
      asset: 'rr.replay',
      start: iso(p.start),
      end: iso(p.start + 500),
      version: 'v2',
    });
    const [request] = await waitFor(
      async () => {
        const rows = await requestsOf('rr_replay', p.start);
        return rows.length > 0 ? rows : undefined;
      },
      { what: 'the replay request', timeout: LOADED_DEADLINE_MS },
    );
    const job = await waitFor(() => repairs.getJob(`repair-${request!.id}~a1`), {
      what: 'the replay request job',
    });
    expect(job.data.ranges).toEqual([
      { start: iso(p.start), end: iso(p.start + 500), kind: 'replay_required', required_version: 'v2' },
    ]);
    await producer.add('e', {
      asset: 'rr.replay',
      start: iso(p.start),
      end: iso(p.start + 500),
      version: 'v2',
      id: 'rp-2',
    });
    await waitFor(async () => (await requestsOf('rr_replay', p.start))[0]?.state === 'repaired', {
      what: 'repaired',
    });
    // The rerun follows the repair.
    await waitFor(
      async () =>
        (await runs.getJobs(['waiting', 'active', 'completed', 'delayed'])).find(
          (j) =>
            j.data.rollup === 'rr_replay' && j.data.period.start === iso(p.start) && j.data.generation === 2,
        ),
      { what: 'the rerun', timeout: LOADED_DEADLINE_MS },
    );
  });
  it('asks for a replay requirement in an hourly rollup once its commit wakes the scan, before the next hour passes', async () => {
    running ??= await start();
    const hour = 3_600_000;
    const lo = Math.floor(Date.now() / hour) * hour - 2 * hour;
    await producer.add('e', {
      asset: 'rr.hourly',
      start: iso(lo),
      end: iso(lo + hour),
      version: 'v1',
      id: 'h-1',
    });
    await waitFor(
      async () =>
        (
          await db.sql`select 1 from periods where rollup_id = 'rr_hourly' and lo = ${lo * 1000} and state = 'triggered'`
        ).length > 0,
      { what: 'the hour triggered', timeout: LOADED_DEADLINE_MS },
    );
    await producer.add('e', {
      type: 'replay_requirement',
      asset: 'rr.hourly',
      start: iso(lo),
      end: iso(lo + 60_000),
      version: 'v2',
    });
    // Before the first scan the hour had nothing: a request for all of it, repaired by the event.
    const request = await waitFor(
      async () =>
        (await requestsOf('rr_hourly', lo)).find(
          (r) => r.state === 'open' && JSON.stringify(r.ranges).includes('replay_required'),
        ),
      // Without the wake, the next scan is at the top of the hour (or 10 minutes after the last).
      { what: 'the replay request of the hour', timeout: LOADED_DEADLINE_MS },
    );
    expect(request.ranges).toEqual([
      { lo: lo * 1000, hi: (lo + 60_000) * 1000, kind: 'replay_required', required_version: 'v2' },
    ]);
  });
});
