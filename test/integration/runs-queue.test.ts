/**
 * Runs on a queue target, learnt from the BullMQ job itself: a real worker that fails
 * the first attempt and succeeds on the retry (with backoff), a run that times out, a job removed
 * before its outcome was seen (lost), and outcomes that happen while the daemon is stopped or
 * while the lease moves to another instance.
 */
import type { Job } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/daemon.js';
import { queueConnection } from '../../src/queue/backend.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// biome-ignore lint/suspicious/noExplicitAny: answers are read as untyped JSON
type Json = Record<string, any>;

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const compact = day.replaceAll('-', '');
const hourOf = (h: number) => `${day}T${String(h).padStart(2, '0')}`;
const span = (h: number) => ({
  start: `${hourOf(h)}:00:00Z`,
  end: h === 23 ? `${day}T23:59:59.999999Z` : `${hourOf(h + 1)}:00:00Z`,
});

const db = await createTestDatabase();
const prefix = createTestPrefix();
const rollup = (id: string, queue: string, run: Record<string, unknown>) => ({
  id,
  upstream: [`${id}.in`],
  every: 'hour',
  begin: day,
  run,
  target: { type: 'queue', queue },
});
const config = testConfig(db, prefix, {
  scheduler: { run_check_every: 'PT0.1S' },
  rollups: [
    rollup('flaky', 'flaky-runs', { retries: 2, backoff: 'PT0.3S', timeout: 'PT60S' }),
    rollup('slow', 'slow-runs', { retries: 0, timeout: 'PT1S' }),
    rollup('gone', 'gone-runs', { retries: 0 }),
    rollup('handover', 'handover-runs', { retries: 0 }),
    rollup('tidy', 'tidy-runs', { retries: 0 }),
  ],
});
const producer = testProducer(config);
const log = createLogger(config.log_level);

const daemons = new Set<{ stop(): Promise<void> }>();
afterAll(async () => {
  for (const d of daemons) await d.stop();
});
async function start() {
  const daemon = await startDaemon(config, log);
  daemons.add(daemon);
  return {
    ...daemon,
    stop: async () => {
      daemons.delete(daemon);
      await daemon.stop();
    },
  };
}

let daemon = await start();

const period = async (id: string, h: number): Promise<Json> =>
  (await daemon.http.inject({ url: `/v1/rollups/${id}/periods/${hourOf(h)}` })).json();
const untilRun = (id: string, h: number, ok: (run: Json) => boolean, what: string) =>
  waitFor(
    async () => {
      const answer = await period(id, h);
      return answer.period?.run && ok(answer.period.run) ? answer : undefined;
    },
    { what, timeout: 30_000 },
  );
const cover = (id: string, h: number) => producer.add('e', { asset: `${id}.in`, ...span(h), version: 'v1' });

function worker(
  queue: string,
  processor: (job: Job) => Promise<unknown>,
  options: { removeOnComplete?: { count: number } } = {},
) {
  const connection = queueConnection(config);
  const w = connection.worker(queue, prefix, processor, options);
  afterAll(async () => {
    await w.close();
    await connection.close();
  });
  return w;
}

describe('queue target runs', () => {
  it('a job that fails its first attempt is retried after the backoff as a new attempt with its own job id, and succeeds', async () => {
    const seen: Array<{ id: string | undefined; attempt: unknown; run_id: unknown }> = [];
    worker('flaky-runs', async (job) => {
      seen.push({ id: job.id, attempt: job.data.attempt, run_id: job.data.run_id });
      if (job.data.attempt === 1) throw new Error('first attempt fails');
      return 'ok';
    });
    await cover('flaky', 1);
    const done = await untilRun('flaky', 1, (r) => r.state === 'succeeded', 'the retry succeeded');
    const key = `flaky@${compact}T010000Z#1`;
    expect(done.period.run).toMatchObject({
      attempt: 2,
      state: 'succeeded',
      error: null,
      run_id: `${key}~a2`,
    });
    // Exactly one job per attempt at the target, each with its own id and the payload's attempt.
    expect(seen).toEqual([
      { id: key, attempt: 1, run_id: key },
      { id: `${key}~a2`, attempt: 2, run_id: `${key}~a2` },
    ]);
    const [second, first] = done.runs;
    expect(first).toMatchObject({
      attempt: 1,
      state: 'failed',
      error: 'first attempt fails',
      next_retry_at: null,
    });
    expect(second).toMatchObject({ attempt: 2, state: 'succeeded', cause: 'retry' });
    // The retry waited for the backoff after the failure.
    expect(Date.parse(second.created_at) - Date.parse(first.finished_at)).toBeGreaterThanOrEqual(250);
    // 'running' is recorded only when a check saw the job active before it failed.
    expect(first.reports.map((r: Json) => r.state).filter((s: string) => s !== 'running')).toEqual([
      'started',
      'failed',
    ]);
    const listing = (await daemon.http.inject({ url: '/v1/rollups' })).json() as Json;
    expect(listing.rollups.find((r: Json) => r.id === 'flaky')).toMatchObject({
      run: { retries: 2, backoff: 'PT0.3S', timeout: 'PT1M' },
      runs: { pending: 0, started: 0, running: 0, failed: 0, timed_out: 0, lost: 0 },
    });
  });

  it('a run without an outcome within run.timeout is timed_out (and counted as needing a look)', async () => {
    await cover('slow', 2);
    const started = await untilRun('slow', 2, (r) => r.state === 'started', 'the run started');
    expect(started.period.run.started_at).not.toBeNull();
    const timedOut = await untilRun('slow', 2, (r) => r.state === 'timed_out', 'the run timed out');
    expect(timedOut.period.run).toMatchObject({ attempt: 1, next_retry_at: null });
    expect(timedOut.period.run.error).toMatch(/no outcome within 1 s/);
    const failed = (await daemon.http.inject({ url: `/v1/rollups/slow/periods?run_state=timed_out` })).json();
    expect(failed.periods.map((p: Json) => p.key)).toEqual([hourOf(2)]);
    const none = (await daemon.http.inject({ url: `/v1/rollups/slow/periods?run_state=succeeded` })).json();
    expect(none.periods).toEqual([]);
    const counts = (await daemon.http.inject({ url: '/v1/rollups?q=slow' })).json() as Json;
    expect(counts.rollups[0].runs).toMatchObject({ timed_out: 1, started: 0 });
    const bad = await daemon.http.inject({ url: `/v1/rollups/slow/periods?run_state=done` });
    expect(bad.json()).toMatchObject({ code: 'invalid_run_state' });
  });

  it('a job removed before its outcome was seen is lost, never succeeded', async () => {
    const queue = testQueue('gone-runs', prefix, config);
    await cover('gone', 3);
    await untilRun('gone', 3, (r) => r.state === 'started', 'the run started');
    const key = `gone@${compact}T030000Z#1`;
    await (await queue.getJob(key))!.remove();
    const lost = await untilRun('gone', 3, (r) => r.state === 'lost', 'the run lost');
    expect(lost.period.run.error).toMatch(/removed/);
  });

  it('a job its worker removes on completion is succeeded: the completion event was seen', async () => {
    const queue = testQueue('tidy-runs', prefix);
    const key = `tidy@${compact}T060000Z#1`;
    worker('tidy-runs', async () => 'ok', { removeOnComplete: { count: 0 } });
    await cover('tidy', 6);
    // A check may find the job gone before the event arrives (lost for a moment): the event wins.
    const done = await untilRun('tidy', 6, (r) => r.state === 'succeeded', 'succeeded');
    expect(done.period.run).toMatchObject({ state: 'succeeded', attempt: 1 });
    expect(await queue.getJobState(key)).toBe('unknown');
  });

  it('an outcome reached while no daemon runs, and one reached after the lease moved, are both recorded', async () => {
    await cover('handover', 4);
    await untilRun('handover', 4, (r) => r.state === 'started', 'the run started');
    await daemon.stop();
    // Completed while nobody watches: the job's state is the record, read by the next leader.
    worker('handover-runs', async () => 'ok');
    const key = `handover@${compact}T040000Z#1`;
    const queue = testQueue('handover-runs', prefix, config);
    await waitFor(async () => (await queue.getJobState(key)) === 'completed', { what: 'job completed' });
    daemon = await start();
    await untilRun('handover', 4, (r) => r.state === 'succeeded', 'succeeded after the restart');

    // Fail-over: a standby takes the lease from a leader that stops mid-run, and follows its runs.
    const standby = await start();
    await cover('handover', 5);
    await untilRun('handover', 5, (r) => r.state === 'started' || r.state === 'succeeded', 'started');
    await daemon.stop();
    daemon = standby;
    const done = await untilRun('handover', 5, (r) => r.state === 'succeeded', 'succeeded after fail-over');
    expect(done.runs).toHaveLength(1);
  });
});
