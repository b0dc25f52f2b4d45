/**
 * bench:runs: how fast a downstream outcome becomes visible, and what open runs cost the scheduler
 * (issue 26), with 1,000 hourly rollups on one queue target and the daemon in its own
 * process.
 *
 * 1. Daemon A idles with no run open: its idle scheduler pass p50 is the baseline.
 * 2. The last complete hour of every rollup is covered: 1,000 triggers, 1,000 jobs waiting on the
 *    target queue, nobody consuming them: 1,000 open runs.
 * 3. Daemon A stops (SIGTERM) and daemon B starts on the same database, so its pass summary holds
 *    only passes with the 1,000 runs open (and it must find them after the restart).
 * 4. Steady: jobs completed one at a time by a BullMQ worker fetching them by hand, each timed from
 *    moveToCompleted resolving (the job is completed in Redis) to the first answer of
 *    GET /v1/rollups/{id}/periods/{key} with run.state = succeeded (polled every BENCH_POLL_MS).
 * 5. Burst: the rest completed at once (the top of the hour when every hourly job ends together),
 *    timed to the last of them visible; the per-run figures are upper bounds by one poll round.
 *
 * Prints one JSON object. Against the goals: steady p99 ≤ 500 ms, idle pass p50 ≤ 20 ms.
 *
 *   npm run bench:runs                          # 1,000 rollups, 200 steady completions
 *   BENCH_ROLLUPS=200 BENCH_STEADY=50 npm run bench:runs
 */
import { type Job, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import {
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  quantile,
  REDIS_URL,
  round,
  schedulerPasses,
  spawnDaemon,
  uniqueName,
} from './common.js';

const ROLLUPS = Number(process.env.BENCH_ROLLUPS ?? 1000);
const STEADY = Math.min(ROLLUPS, Number(process.env.BENCH_STEADY ?? 200));
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 30);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 5);
const BURST_POLLERS = 8;
const TARGET_QUEUE = 'runs-bench';
const HOUR = 3_600_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stats = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const r = (x: number | undefined) => (x === undefined ? null : round(x, 1));
  return {
    n: sorted.length,
    p50: r(quantile(sorted, 0.5)),
    p90: r(quantile(sorted, 0.9)),
    p99: r(quantile(sorted, 0.99)),
    max: r(sorted.at(-1)),
  };
};

interface RunView {
  readonly state: string;
  readonly attempt: number;
}

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const prefix = uniqueName('crbench');
  const hour = Math.floor(Date.now() / HOUR) * HOUR - HOUR; // the last complete hour
  const config = {
    database_url: db.url,
    redis_url: REDIS_URL,
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix },
    rollups: Array.from({ length: ROLLUPS }, (_, i) => ({
      id: `r${i}`,
      upstream: [`runs.a${i}`],
      every: 'hour',
      begin: new Date(hour - 24 * HOUR).toISOString(),
      target: { type: 'queue', queue: TARGET_QUEUE },
    })),
  };
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const producer = new Queue('asset-events', { connection, prefix });
  const target = new Queue(TARGET_QUEUE, { connection, prefix });

  let daemon = await spawnDaemon(config);
  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${daemon.url}${path}`);
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  const metrics = async () => (await fetch(`${daemon.url}/metrics`)).text();
  /** The pass histogram by kind: idle (nothing to do) and busy (a delivery, an outcome, a check). */
  const passes = async () => {
    const body = await metrics();
    return { idle: schedulerPasses(body, 'idle'), busy: schedulerPasses(body, 'busy') };
  };
  const leading = async () => {
    for (;;) {
      const ready = await api<{ scheduler?: { role?: string } }>('/readyz').catch(() => undefined);
      if (ready?.scheduler?.role === 'leader') return;
      await sleep(100);
    }
  };
  /** The period's run, from the period detail (`run` on the period). */
  const runOf = async (rollup: string, key: string): Promise<RunView | null> => {
    const body = await api<{ run?: RunView | null; period?: { run?: RunView | null } }>(
      `/v1/rollups/${rollup}/periods/${encodeURIComponent(key)}`,
    );
    return body.run ?? body.period?.run ?? null;
  };

  // 1. Idle with no run open.
  await leading();
  await sleep(IDLE_SECONDS * 1000);
  const idleNoRuns = await passes();

  // 2. 1,000 triggers, their jobs left waiting.
  const t0 = performance.now();
  await producer.addBulk(
    Array.from({ length: ROLLUPS }, (_, i) => ({
      name: 'e',
      data: {
        asset: `runs.a${i}`,
        start: new Date(hour).toISOString(),
        end: new Date(hour + HOUR).toISOString(),
        id: `bench-${i}`,
      },
    })),
  );
  while ((await target.getWaitingCount()) < ROLLUPS) {
    if (performance.now() - t0 > 120_000) throw new Error('the triggers did not all reach the target queue');
    await sleep(100);
  }
  const allTriggeredMs = round(performance.now() - t0, 0);

  // 3. A restart with 1,000 runs open.
  await daemon.stop();
  daemon = await spawnDaemon(config);
  await leading();
  await sleep(IDLE_SECONDS * 1000);
  const idleOpenRuns = await passes();
  const openAfterRestart = await runOf('r0', (await target.getWaiting(0, 0))[0]!.data.period.key);

  // 4. Steady completions, one at a time.
  const worker = new Worker(TARGET_QUEUE, null, { connection, prefix, autorun: false });
  const token = 'bench-runs';
  const complete = async (): Promise<{ job: Job; at: number } | undefined> => {
    const job = (await worker.getNextJob(token)) as Job | undefined;
    if (!job) return undefined;
    await job.moveToCompleted({ ok: true }, token, false);
    return { job, at: performance.now() };
  };
  const visible = async (job: Job, deadlineMs = 30_000): Promise<number | null> => {
    const limit = performance.now() + deadlineMs;
    while (performance.now() < limit) {
      const run = await runOf(job.data.rollup, job.data.period.key);
      if (run?.state === 'succeeded') return performance.now();
      await sleep(POLL_MS);
    }
    return null;
  };
  const steady: number[] = [];
  const notVisible: string[] = [];
  let taken = 0;
  for (; taken < STEADY; taken++) {
    const done = await complete();
    if (!done) break;
    const at = await visible(done.job);
    if (at === null) notVisible.push(done.job.id!);
    else steady.push(at - done.at);
    await sleep(20); // a gap, so each completion is seen on its own
  }

  // 5. The rest at once.
  const burstStart = performance.now();
  const pending: Array<{ job: Job; at: number }> = [];
  for (; taken < ROLLUPS; taken++) {
    const done = await complete();
    if (!done) break;
    pending.push(done);
  }
  const completedAllMs = performance.now() - burstStart;
  const burst: number[] = [];
  const burstDeadline = performance.now() + 120_000;
  let queue = pending;
  while (queue.length > 0 && performance.now() < burstDeadline) {
    const still: typeof pending = [];
    for (let i = 0; i < queue.length; i += BURST_POLLERS) {
      await Promise.all(
        queue.slice(i, i + BURST_POLLERS).map(async (p) => {
          const run = await runOf(p.job.data.rollup, p.job.data.period.key);
          if (run?.state === 'succeeded') burst.push(performance.now() - p.at);
          else still.push(p);
        }),
      );
    }
    queue = still;
  }
  const burstDrainMs = performance.now() - burstStart;
  await worker.close();

  const runsTotal = /^coverage_rollup_runs_total\{[^}]*state="succeeded"[^}]*\} (\S+)$/gm;
  const succeededMetric = [...(await metrics()).matchAll(runsTotal)].reduce((n, m) => n + Number(m[1]), 0);
  process.stdout.write(
    `${JSON.stringify({
      benchmark: 'runs',
      database_connection: DATABASE_CONNECTION,
      rollups: ROLLUPS,
      poll_ms: POLL_MS,
      all_triggered_ms: allTriggeredMs,
      open_run_after_restart: openAfterRestart,
      scheduler_passes: { no_open_runs: idleNoRuns, open_runs: { runs: ROLLUPS, ...idleOpenRuns } },
      completion_to_succeeded_ms: {
        steady: stats(steady),
        burst: {
          ...stats(burst),
          runs: pending.length,
          completed_all_ms: round(completedAllMs, 0),
          all_visible_ms: round(burstDrainMs, 0),
          not_visible_within_120s: queue.length,
        },
        not_visible_within_30s: notVisible,
      },
      runs_total_succeeded_metric: succeededMetric,
      goals: { steady_p99_ms: 500, idle_pass_p50_ms_open_runs: 20 },
    })}\n`,
  );
  await target.close();
  await producer.close();
  connection.disconnect();
  await daemon.stop();
  await db.drop();
  await dropPrefix(prefix);
}

await main();
