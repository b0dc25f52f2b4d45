/**
 * bench:trigger: with background ingest (default 2,000 events/s over 50 assets), the time from
 * enqueuing the event that completes a period to the downstream job being on the target queue.
 * The daemon runs in its own process, as in production. Prints JSON: p50, p90, p99 and max over
 * BENCH_PERIODS periods (default 250), after BENCH_WARMUP periods that are not counted (default 50).
 * BENCH_QUEUE_BACKEND=postgres puts the events and target queues on BullMQ's PostgreSQL backend,
 * in the bench database (default redis). BENCH_GROUPS=N spreads the events queue over N queue
 * groups (queue.groups), the producer routing each event to its asset's group (default 1).
 *
 *   npm run bench:trigger
 *   BENCH_QUEUE_BACKEND=postgres npm run bench:trigger
 *   BENCH_GROUPS=2 npm run bench:trigger
 */
import { parseConfig } from '../src/config/index.js';
import { groupOf } from '../src/core/events/routing.js';
import { queueConnection } from '../src/queue/backend.js';
import { EventQueues } from '../src/queue/event-queues.js';
import { queueGroups } from '../src/queue/groups.js';
import {
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  quantile,
  REDIS_URL,
  round,
  spawnDaemon,
  uniqueName,
} from './common.js';

const PERIODS = Number(process.env.BENCH_PERIODS ?? 250);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 50);
const BACKGROUND_RATE = Number(process.env.BENCH_RATE ?? 2000);
const BACKGROUND_ASSETS = 50;
const TICK_MS = 50;
const BACKEND = process.env.BENCH_QUEUE_BACKEND === 'postgres' ? 'postgres' : 'redis';
const GROUPS = Number(process.env.BENCH_GROUPS ?? 1);

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const prefix = uniqueName('crbench');
  const daemon = await spawnDaemon({
    database_url: db.url,
    redis_url: REDIS_URL,
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix, backend: BACKEND, groups: GROUPS },
    rollups: [
      {
        id: 'trig',
        upstream: ['bench.trigger'],
        every: 1000,
        begin: 0,
        target: { type: 'queue', queue: 'bench-runs' },
      },
    ],
  });
  const config = parseConfig({
    database_url: db.url,
    redis_url: REDIS_URL,
    queue: { prefix, backend: BACKEND, groups: GROUPS },
  });
  const connection = queueConnection(config);
  // Routes each event to its asset's group, as emit and POST /v1/events do.
  const producer = new EventQueues(connection, config.queue);
  const triggerQueue = producer.queues[groupOf('bench.trigger', producer.queues.length)]!;
  const events = connection.queueEvents('bench-runs', prefix);
  await events.waitUntilReady();
  const seen = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  events.on('waiting', ({ jobId }) => {
    seen.set(jobId, performance.now());
    waiters.get(jobId)?.();
  });

  // Background ingest at a steady rate: 5-minute slices over many time assets.
  let background = 0;
  let running = true;
  const perTick = Math.round((BACKGROUND_RATE * TICK_MS) / 1000);
  const base = Date.parse('2025-01-01T00:00:00Z');
  const loop = (async () => {
    let next = performance.now();
    while (running) {
      const batch = Array.from({ length: perTick }, () => {
        const n = background++;
        const asset = `bench.bg.${n % BACKGROUND_ASSETS}`;
        const start = base + Math.floor(n / BACKGROUND_ASSETS) * 300_000;
        return { asset, start: new Date(start).toISOString(), end: new Date(start + 300_000).toISOString() };
      });
      await producer.addBulk(batch);
      next += TICK_MS;
      await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())));
    }
  })();
  const startedAt = performance.now();
  await new Promise((r) => setTimeout(r, 2000)); // let the background reach its rate first

  const latencies: number[] = [];
  const sentAt: number[] = [];
  const visibleAt: number[] = [];
  // The first WARMUP periods are not counted: they time the JIT compiling the trigger path and the
  // target queue's first connection, not the steady state the goal is about.
  const measured: number[] = []; // period starts of the counted periods
  // When the worker took each counted event's job (BullMQ's processedOn): splits the wait before
  // the commit into the queue's part and the group commit's part.
  const activeAt: Array<number | undefined> = [];
  for (let i = 0; i < WARMUP + PERIODS; i++) {
    const key = `trig@${i * 1000}#1`;
    const arrived = new Promise<void>((resolve) => waiters.set(key, resolve));
    const t0 = performance.now();
    const sent = Date.now();
    const [job] = await producer.addBulk([{ asset: 'bench.trigger', start: i * 1000, end: i * 1000 + 1000 }]);
    await Promise.race([arrived, new Promise((r) => setTimeout(r, 10_000))]);
    waiters.delete(key);
    const t1 = seen.get(key);
    if (t1 === undefined) throw new Error(`no downstream job for ${key} within 10 s`);
    if (i < WARMUP) continue;
    measured.push(i * 1000);
    sentAt.push(sent);
    latencies.push(t1 - t0);
    visibleAt.push(Date.now() - (performance.now() - t1));
    // Read after the timed window; on Redis completed jobs are kept (the last 1,000), so it is
    // still there.
    activeAt.push((await triggerQueue.getJob(job!.id!))?.processedOn);
  }
  running = false;
  await loop;
  const seconds = (performance.now() - startedAt) / 1000;
  const sorted = [...latencies].sort((a, b) => a - b);
  // Where the time goes: queue + group commit (to ingested_at), scheduler (to decided_at), dispatch.
  const rows = await db.sql<{ lo: number; ingested: Date; decided: Date }[]>`
    select e.lo, e.ingested_at as ingested, t.decided_at as decided
    from events e join assets a on a.id = e.asset_id and a.name = 'bench.trigger'
    join triggers t on t.rollup_id = 'trig' and t.period_lo = e.lo`;
  const byLo = new Map(rows.map((r) => [r.lo, r]));
  const stage = (f: (i: number, r: { ingested: Date; decided: Date }) => number) => {
    const values = measured
      .map((lo, i) => f(i, byLo.get(lo)!))
      .filter((v) => !Number.isNaN(v))
      .sort((a, b) => a - b);
    // None on the PostgreSQL backend's taken stages: its consumer deletes a job as it completes.
    if (values.length === 0) return null;
    return {
      p50: round(quantile(values, 0.5)!, 1),
      p99: round(quantile(values, 0.99)!, 1),
      n: values.length,
    };
  };
  process.stdout.write(
    `${JSON.stringify({
      benchmark: 'trigger',
      queue_backend: BACKEND,
      queue_groups: GROUPS,
      database_connection: DATABASE_CONNECTION,
      periods: PERIODS,
      warmup_periods: WARMUP,
      background_events: background,
      background_rate_per_s: round(background / seconds, 0),
      latency_ms: {
        p50: round(quantile(sorted, 0.5)!, 1),
        p90: round(quantile(sorted, 0.9)!, 1),
        p99: round(quantile(sorted, 0.99)!, 1),
        max: round(sorted.at(-1)!, 1),
      },
      goal_p99_ms: 100,
      stages_ms: {
        enqueue_to_committed: stage((i, r) => r.ingested.getTime() - sentAt[i]!),
        // The two parts of the above: waiting in the queue until the worker takes the job, then
        // waiting in the group commit (batch_wait, the lane's commit in flight) until it starts.
        enqueue_to_taken: stage((i) => (activeAt[i] ?? Number.NaN) - sentAt[i]!),
        taken_to_committed: stage((i, r) => r.ingested.getTime() - (activeAt[i] ?? Number.NaN)),
        committed_to_decided: stage((_, r) => r.decided.getTime() - r.ingested.getTime()),
        decided_to_on_target_queue: stage((i, r) => visibleAt[i]! - r.decided.getTime()),
      },
    })}\n`,
  );
  await events.close();
  await producer.close();
  await connection.close();
  await daemon.stop();
  await db.drop();
  // The target queue lives under the prefix; with groups, the events queues under theirs.
  for (const p of new Set([prefix, ...queueGroups(config.queue).map((g) => g.prefix)])) await dropPrefix(p);
}

await main();
