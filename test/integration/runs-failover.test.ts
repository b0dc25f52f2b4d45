import type { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { queueConnection } from '../../src/queue/backend.js';
import { testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL, withTestBackend } from '../helpers/env.js';
import { type DaemonProcess, type LogLine, logTime, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Runs across a kill -9 of the lease holder, with real daemon processes (the
 * built `coverage-rollup start`) on one database and a real BullMQ worker on the queue target.
 * The holder delivers attempt 1 of several periods and is killed before any has an outcome; the
 * worker then completes some jobs and fails others while no living daemon leads, and one job is
 * still running when the standby takes over; a retry the holder scheduled is due only after the
 * kill. The standby must record every outcome: succeeded, retried as attempt 2 with its own job
 * id, failed once its retries are spent; exactly one job per attempt at the target, and no run
 * lost or left open. Integer buckets of 10, so nothing depends on the wall clock.
 */

const procs = processHarness();
const db = await createTestDatabase();
const prefix = createTestPrefix();
const settings = parseConfig(
  withTestBackend({ database_url: db.url, redis_url: REDIS_URL, queue: { prefix } }),
);
const producer = testProducer(settings);
const downstream = testQueue('downstream', prefix, settings);

const ACQUIRED = 'acquired the scheduler lease';
/** A ttl long enough that the outcomes reached after the kill are all in before the standby leads. */
const LEASE = { ttl: 'PT4S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' };

const config = {
  database_url: db.url,
  redis_url: REDIS_URL,
  log_level: 'info',
  http: { host: '127.0.0.1', port: 0 },
  queue: { prefix, batch_wait: 'PT0.002S' },
  lease: LEASE,
  shutdown_timeout: 'PT10S',
  scheduler: { run_check_every: 'PT0.1S' },
  assets: [
    { name: 'a', domain: 'integer' },
    { name: 'b', domain: 'integer' },
  ],
  rollups: [
    {
      id: 'r',
      upstream: 'a',
      every: 10,
      begin: 0,
      run: { retries: 1, backoff: 'PT0.2S', timeout: 'PT60S' },
      target: { type: 'queue', queue: 'downstream' },
    },
    {
      // Its failed attempt 1 is recorded by the holder, whose retry is due only after the kill.
      id: 'q',
      upstream: 'b',
      every: 10,
      begin: 0,
      run: { retries: 1, backoff: 'PT6S', timeout: 'PT60S' },
      target: { type: 'queue', queue: 'downstream-q' },
    },
  ],
};

/** What the worker does with each period's jobs, by period start. */
const PLAN = {
  0: 'ok', // completes while no daemon leads
  10: 'ok',
  20: 'retry', // attempt 1 fails while no daemon leads; attempt 2 (the standby's) completes
  30: 'retry',
  40: 'fail', // both attempts fail: failed once its one retry is spent
  50: 'fail',
  60: 'slow', // still running at the takeover; completes after it
} as const;
type Plan = (typeof PLAN)[keyof typeof PLAN];
const LOS = Object.keys(PLAN).map(Number);
const planOf = (lo: number): Plan => PLAN[lo as keyof typeof PLAN];
const withPlan = (...plans: Plan[]) => LOS.filter((lo) => plans.includes(planOf(lo)));
const key = (lo: number) => `r@${lo}#1`;
const retryKey = (lo: number) => `${key(lo)}~a2`;

interface RunRow {
  period_lo: number;
  attempt: number;
  run_id: string;
  state: string;
  cause: string;
  error: string | null;
  lease_token: number;
  next_retry_at: Date | null;
  check_at: Date | null;
}
const runRows = () => db.sql<RunRow[]>`
  select period_lo, attempt, run_id, state, cause, error, lease_token, next_retry_at, check_at
  from runs where rollup_id = 'r' order by period_lo, attempt`;
const qRuns = () => db.sql<RunRow[]>`
  select period_lo, attempt, run_id, state, cause, error, lease_token, next_retry_at, check_at
  from runs where rollup_id = 'q' order by attempt`;

/** Per run id, how many `msg` lines name it across processes. */
function countByRun(processes: readonly DaemonProcess[], msg: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const p of processes)
    for (const line of p.logs(msg)) counts[String(line.run_id)] = (counts[String(line.run_id)] ?? 0) + 1;
  return counts;
}

const tokenOf = (line: LogLine) => line.fencingToken as number;

describe('runs across a kill -9 of the lease holder', () => {
  it('the standby records every outcome reached before and after it leads; one job per attempt, none lost', async () => {
    const a = await procs.spawn({ name: 'runs-a', config });
    const tokenA = tokenOf(await a.waitForLog(ACQUIRED, { what: 'runs-a to lead' }));
    const b = await procs.spawn({ name: 'runs-b', config });
    const role = async () => ((await (await fetch(`${b.url}/readyz`)).json()) as Json).scheduler.role;
    await waitFor(async () => (await role()) === 'standby', { what: 'runs-b standby' });

    // The q worker runs from the start: attempt 1 fails, attempt 2 completes.
    const connection = queueConnection(settings);
    const processedQ: string[] = [];
    const workerQ = connection.worker(
      'downstream-q',
      prefix,
      async (job: Job) => {
        processedQ.push(job.id!);
        if (job.data.attempt === 1) throw new Error('attempt 1 fails');
        return 'ok';
      },
      { concurrency: 2 },
    );
    let worker: { close(): Promise<void> } | undefined;
    let releaseSlow = () => {};
    try {
      await producer.addBulk([
        ...LOS.map((lo) => ({ name: 'e', data: { asset: 'a', start: lo, end: lo + 10, version: 'v1' } })),
        { name: 'e', data: { asset: 'b', start: 0, end: 10, version: 'v1' } },
      ]);
      // Attempt 1 of every period delivered (no worker yet: every job waits), and its line logged.
      await waitFor(
        async () => {
          const rows = await runRows();
          return rows.length === LOS.length && rows.every((r) => r.state === 'started');
        },
        { what: 'attempt 1 of every period started' },
      );
      await waitFor(() => [...LOS.map(key), 'q@0#1'].every((id) => countByRun([a], 'delivered')[id] === 1), {
        what: 'every delivery logged',
      });
      // q's attempt 1 failed under the holder, which owes its retry (due 6 s later).
      const [owed] = await waitFor(
        async () => {
          const rows = await qRuns();
          return rows.length === 1 && rows[0]!.state === 'failed' ? rows : undefined;
        },
        { what: "q's attempt 1 recorded failed" },
      );
      expect(owed!.next_retry_at).not.toBeNull();

      const killedAt = Date.now();
      a.signal('SIGKILL');
      expect(await qRuns(), 'the retry not yet made at the kill').toHaveLength(1);
      expect(await a.waitForExit()).toEqual({ code: null, signal: 'SIGKILL' });

      // The worker: each job processed is recorded; the slow one waits for the takeover.
      const processed: string[] = [];
      const slowGate = new Promise<void>((resolve) => {
        releaseSlow = resolve;
      });
      worker = connection.worker(
        'downstream',
        prefix,
        async (job: Job) => {
          processed.push(job.id!);
          const plan = planOf(job.data.period.start);
          if (plan === 'slow') await slowGate;
          if (plan === 'fail' || (plan === 'retry' && job.data.attempt === 1))
            throw new Error(`attempt ${job.data.attempt} fails`);
          return 'ok';
        },
        { concurrency: 10 },
      );
      // Every outcome but the slow one is reached while no living daemon leads.
      await waitFor(
        async () => {
          const states = await Promise.all(LOS.map((lo) => downstream.getJobState(key(lo))));
          return states.every((s, i) =>
            planOf(LOS[i]!) === 'slow' ? s === 'active' : s === 'completed' || s === 'failed',
          );
        },
        { what: 'attempt 1 outcomes at the target' },
      );
      expect(b.logs(ACQUIRED), 'the outcomes came before the standby led').toEqual([]);
      expect((await runRows()).map((r) => r.state)).toEqual(LOS.map(() => 'started'));

      const acquired = await b.waitForLog(ACQUIRED, { timeout: 15_000, what: 'runs-b to take over' });
      const tokenB = tokenOf(acquired);
      expect(tokenB).toBeGreaterThan(tokenA);
      // The slow run is seen running by the new holder before its job completes.
      await waitFor(async () => (await runRows()).some((r) => r.period_lo === 60 && r.state === 'running'), {
        what: 'the slow run seen running after the takeover',
      });
      releaseSlow();

      const expected: Record<number, { attempt: number; state: string }> = {
        0: { attempt: 1, state: 'succeeded' },
        10: { attempt: 1, state: 'succeeded' },
        20: { attempt: 2, state: 'succeeded' },
        30: { attempt: 2, state: 'succeeded' },
        40: { attempt: 2, state: 'failed' },
        50: { attempt: 2, state: 'failed' },
        60: { attempt: 1, state: 'succeeded' },
      };
      const periods = await waitFor(
        async () => {
          const rows = await db.sql<{ lo: number; run_attempt: number; run_state: string }[]>`
            select lo, run_attempt, run_state from periods where rollup_id = 'r' order by lo`;
          const now = Object.fromEntries(
            rows.map((r) => [r.lo, { attempt: r.run_attempt, state: r.run_state }]),
          );
          return JSON.stringify(now) === JSON.stringify(expected) ? rows : undefined;
        },
        { timeout: 30_000, what: 'every period at its final run' },
      );
      const recordedMs = Date.now() - killedAt;
      expect(periods).toHaveLength(LOS.length);
      // The retry owed at the kill is made once, by the new holder.
      const q = await waitFor(
        async () => {
          const rows = await qRuns();
          return rows.length === 2 && rows[1]!.state === 'succeeded' ? rows : undefined;
        },
        { what: "q's attempt 2 succeeded" },
      );
      expect(q.map((r) => [r.attempt, r.run_id, r.state, r.cause, r.lease_token])).toEqual([
        [1, 'q@0#1', 'failed', 'trigger', tokenA],
        [2, 'q@0#1~a2', 'succeeded', 'retry', tokenB],
      ]);
      expect(processedQ).toEqual(['q@0#1', 'q@0#1~a2']);

      // Every attempt, its id, state and the lease that made it; nothing open, nothing lost.
      const runs = await runRows();
      const retried = withPlan('retry', 'fail');
      expect(runs.map((r) => [r.period_lo, r.attempt, r.run_id, r.state, r.cause, r.lease_token])).toEqual(
        LOS.flatMap((lo) => {
          const plan = planOf(lo);
          const first = [
            lo,
            1,
            key(lo),
            plan === 'ok' || plan === 'slow' ? 'succeeded' : 'failed',
            'trigger',
            tokenA,
          ];
          if (plan === 'ok' || plan === 'slow') return [first];
          return [first, [lo, 2, retryKey(lo), plan === 'retry' ? 'succeeded' : 'failed', 'retry', tokenB]];
        }),
      );
      for (const r of runs.filter((r) => r.state === 'failed'))
        expect(r.error).toBe(`attempt ${r.attempt} fails`);
      // The spent retries schedule nothing more, and no finished queue run is still asked about.
      expect(runs.filter((r) => r.next_retry_at !== null || r.check_at !== null)).toEqual([]);

      // Exactly one job per attempt at the target, each processed once.
      const allIds = [...LOS.map(key), ...retried.map(retryKey)].sort();
      expect([...processed].sort()).toEqual(allIds);
      const completed = (await downstream.getJobs(['completed'])).map((j) => j.id).sort();
      const failed = (await downstream.getJobs(['failed'])).map((j) => j.id).sort();
      expect(completed).toEqual(
        [...withPlan('ok', 'slow').map(key), ...withPlan('retry').map(retryKey)].sort(),
      );
      expect(failed).toEqual([...retried.map(key), ...withPlan('fail').map(retryKey)].sort());
      await waitFor(
        () => [...retried.map(retryKey), 'q@0#1~a2'].every((id) => countByRun([b], 'delivered')[id] === 1),
        {
          what: 'the retries’ deliveries logged',
        },
      );
      expect(countByRun([a, b], 'delivered')).toEqual(
        Object.fromEntries([...allIds, 'q@0#1', 'q@0#1~a2'].map((id) => [id, 1])),
      );

      // The history of each run says who learnt what: the outcomes from the queue, none twice.
      const reports = await db.sql<{ period_lo: number; attempt: number; source: string; state: string }[]>`
        select period_lo, attempt, source, state from run_reports where rollup_id = 'r' and effect = 'applied'
          order by id`;
      for (const r of runs) {
        const mine = reports.filter((p) => p.period_lo === r.period_lo && p.attempt === r.attempt);
        expect(
          mine.filter((p) => p.state === r.state),
          `${r.run_id} ${r.state} once`,
        ).toHaveLength(1);
        expect(mine.find((p) => p.state === r.state)!.source).toBe('queue');
      }
      const response = await fetch(`${b.url}/v1/rollups/r/periods?start=0&end=70`);
      const listing = (await response.json()) as Json;
      expect(response.status, JSON.stringify(listing)).toBe(200);
      expect(listing.periods.map((p: Json) => [p.key, p.run?.attempt, p.run?.state])).toEqual(
        LOS.map((lo) => [String(lo), expected[lo]!.attempt, expected[lo]!.state]),
      );
      console.warn(
        `[runs-failover] standby acquired ${logTime(acquired) - killedAt} ms after the kill; every period at its final run ${recordedMs} ms after it`,
      );
      expect(await b.stop()).toEqual({ code: 0, signal: null });
    } finally {
      releaseSlow();
      await worker?.close();
      await workerQ.close();
      await connection.close();
    }
  });
});

// biome-ignore lint/suspicious/noExplicitAny: answers are read as untyped JSON
type Json = Record<string, any>;
