/**
 * Ingest throughput: drains N queued events through our worker into the index, and the same N
 * through a no-op BullMQ worker with the same concurrency on the same Redis, in one run. Prints
 * JSON with both rates and their ratio (goal: ≥ 0.8).
 *
 *   npm run bench:ingest                     # N = 100000
 *   BENCH_N=200000 BENCH_CONCURRENCY=1000 BENCH_BATCH=500 npm run bench:ingest
 *   BENCH_PG_SOCKET_DIR= npm run bench:ingest  # PostgreSQL over TCP rather than its Unix socket
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/index.js';
import { startIngestWorker } from '../src/ingest/worker.js';
import { createMetrics } from '../src/metrics/registry.js';
import {
  cpuPerItem,
  cpuSnapshot,
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  log,
  median,
  REDIS_URL,
  round,
  uniqueName,
} from './common.js';

const N = Number(process.env.BENCH_N ?? 100_000);
const ASSETS = Number(process.env.BENCH_ASSETS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const overrides: Record<string, number> = {};
if (process.env.BENCH_CONCURRENCY) overrides.concurrency = Number(process.env.BENCH_CONCURRENCY);
if (process.env.BENCH_BATCH) overrides.batch_size = Number(process.env.BENCH_BATCH);

const T0 = Date.UTC(2025, 0, 1);
const FIVE_MINUTES = 5 * 60_000;

/**
 * A realistic mix: 50 assets, each a stream of 5-minute slices, interleaved as many producers
 * would send them; about 2 % re-sent (same id), about 1 % never sent (holes), a few out of order.
 */
function workload(n: number, prefix: string): { events: unknown[]; unique: number; holes: number } {
  let seed = 42;
  const rand = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const events: unknown[] = [];
  const next = new Array<number>(ASSETS).fill(0);
  let unique = 0;
  let holes = 0;
  while (events.length < n) {
    const a = Math.floor(rand() * ASSETS);
    const i = next[a]!++;
    if (rand() < 0.01) {
      holes++;
      continue;
    }
    const start = T0 + i * FIVE_MINUTES;
    const event = {
      asset: `${prefix}.${String(a).padStart(2, '0')}`,
      start: new Date(start).toISOString(),
      end: new Date(start + FIVE_MINUTES).toISOString(),
      version: 'v1',
      id: `a${a}-s${i}`,
      produced_at: new Date(start + FIVE_MINUTES + 7_000).toISOString(),
    };
    events.push(event);
    unique++;
    if (rand() < 0.02 && events.length < n) events.push({ ...event });
  }
  // A few neighbours swapped: out-of-order delivery.
  for (let k = 0; k < n / 100; k++) {
    const i = Math.floor(rand() * (n - 1));
    [events[i], events[i + 1]] = [events[i + 1]!, events[i]!];
  }
  return { events, unique, holes };
}

async function fill(queue: Queue, events: readonly unknown[]): Promise<void> {
  for (let i = 0; i < events.length; i += 1000) {
    await queue.addBulk(events.slice(i, i + 1000).map((data) => ({ name: 'event', data })));
  }
}

/**
 * Seconds from start() until `n` jobs completed, the event loop's utilisation meanwhile, and the
 * CPU each event cost in this process, in Redis and in the rest of the machine (PostgreSQL).
 */
async function timeUntil(
  redis: Redis,
  n: number,
  onCompleted: (cb: () => void) => void,
  start: () => void,
): Promise<{ seconds: number; elu: number; cpu: ReturnType<typeof cpuPerItem> }> {
  const cpu0 = await cpuSnapshot(redis);
  const { seconds, elu } = await new Promise<{ seconds: number; elu: number }>((resolve) => {
    let done = 0;
    onCompleted(() => {
      if (++done === n) {
        resolve({
          seconds: (performance.now() - t0) / 1000,
          elu: performance.eventLoopUtilization(elu0).utilization,
        });
      }
    });
    const t0 = performance.now();
    const elu0 = performance.eventLoopUtilization();
    start();
  });
  return { seconds, elu, cpu: cpuPerItem(cpu0, await cpuSnapshot(redis), n) };
}

/**
 * What one Redis call costs apart from the work it asks for: `n` calls of a script that does
 * nothing, `concurrency` in flight as the workers keep them. A claim or completion batched over
 * many jobs could save about this much per job step, and no more (its per-job work in Redis stays).
 */
async function callFloor(redis: Redis, n: number, concurrency: number) {
  const sha = (await redis.script('LOAD', 'return 1')) as string;
  const before = await cpuSnapshot(redis);
  let issued = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (issued++ < n) await redis.evalsha(sha, 0);
    }),
  );
  return cpuPerItem(before, await cpuSnapshot(redis), n);
}

interface Round {
  noop_seconds: number;
  ingest_seconds: number;
  ratio: number;
  noop_event_loop_utilisation: number;
  ingest_event_loop_utilisation: number;
  /** CPU microseconds per event: this process, Redis, the rest (PostgreSQL, kernel), in all. */
  noop_cpu_us_per_event: ReturnType<typeof cpuPerItem>;
  ingest_cpu_us_per_event: ReturnType<typeof cpuPerItem>;
  commits: number;
  mean_batch: number;
  mean_commit_ms: number;
}

async function main(): Promise<void> {
  const db = await createBenchDatabase(20);
  const prefix = uniqueName('crbench');
  const config = parseConfig({
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: 'silent',
    queue: { prefix, ...overrides },
  });
  const { concurrency, batch_size: batchSize } = config.queue;
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const rounds: Round[] = [];
  let floor: ReturnType<typeof cpuPerItem> | undefined;
  let workloadFacts: Record<string, number> = {};
  let index: { events: number; segments: number } | undefined;
  try {
    // Rounds alternate the two workers so that load from elsewhere on the machine hits both alike.
    for (let r = 0; r < ROUNDS; r++) {
      const { events, unique, holes } = workload(N, `bench.r${r}`);
      workloadFacts = { events: events.length, unique_events: unique, holes };

      // 1. The no-op worker: what BullMQ alone costs at this concurrency.
      const noopQueue = new Queue(`noop-events-${r}`, { connection, prefix });
      await fill(noopQueue, events);
      let noop: Worker | undefined;
      const noopRun = await timeUntil(
        connection,
        events.length,
        (cb) => {
          noop = new Worker(noopQueue.name, async () => ({ status: 'noop' }), {
            connection,
            prefix,
            concurrency,
            autorun: false,
            removeOnComplete: { count: 1000 },
            removeOnFail: { count: 10_000 },
          });
          noop.on('completed', cb);
        },
        () => void noop!.run(),
      );
      await noop!.close();
      await noopQueue.obliterate({ force: true });
      await noopQueue.close();

      // 2. Our worker: normalise, group-commit into the index, complete each job after its commit.
      const eventsQueue = new Queue(config.queue.name, { connection, prefix });
      await fill(eventsQueue, events);
      const metrics = createMetrics();
      let ingest: ReturnType<typeof startIngestWorker> | undefined;
      const ingestRun = await timeUntil(
        connection,
        events.length,
        (cb) => {
          ingest = startIngestWorker(config, db.sql, log, metrics);
          ingest.onCompleted(cb);
        },
        () => {},
      );
      await ingest!.close(30_000);
      await eventsQueue.obliterate({ force: true });
      await eventsQueue.close();

      const [row] = await db.sql<{ events: number; segments: number }[]>`
        select sum(event_count)::int as events, sum(segment_count)::int as segments
        from assets where name like ${`bench.r${r}.%`}`;
      if (row?.events !== unique) throw new Error(`logged ${row?.events} events, expected ${unique}`);
      index = row;
      const value = async (
        h: { get(): Promise<{ values: Array<{ metricName?: string; value: number }> }> },
        suffix: string,
      ) => (await h.get()).values.find((v) => v.metricName?.endsWith(suffix))?.value ?? 0;
      const commits = await value(metrics.batchSize, '_count');
      rounds.push({
        noop_seconds: round2(noopRun.seconds),
        ingest_seconds: round2(ingestRun.seconds),
        ratio: round(noopRun.seconds / ingestRun.seconds, 3),
        noop_event_loop_utilisation: round(noopRun.elu, 2),
        ingest_event_loop_utilisation: round(ingestRun.elu, 2),
        noop_cpu_us_per_event: noopRun.cpu,
        ingest_cpu_us_per_event: ingestRun.cpu,
        commits,
        mean_batch: round((await value(metrics.batchSize, '_sum')) / commits, 1),
        mean_commit_ms: round(((await value(metrics.commitSeconds, '_sum')) / commits) * 1000, 1),
      });
    }
    floor = await callFloor(connection, N, concurrency);
  } finally {
    connection.disconnect();
    await dropPrefix(prefix);
    await db.drop();
  }
  const noopRate = N / median(rounds.map((r) => r.noop_seconds));
  const ingestRate = N / median(rounds.map((r) => r.ingest_seconds));
  const result = {
    benchmark: 'ingest',
    ...workloadFacts,
    assets: ASSETS,
    rounds: ROUNDS,
    concurrency,
    batch_size: batchSize,
    batch_wait_ms: config.queue.batch_wait,
    database_connection: DATABASE_CONNECTION,
    noop_events_per_second: Math.round(noopRate),
    ingest_events_per_second: Math.round(ingestRate),
    ratio_of_medians: round(ingestRate / noopRate, 3),
    median_round_ratio: median(rounds.map((r) => r.ratio)),
    goal_ratio: 0.8,
    last_round_index: { logged_events: index?.events, segments: index?.segments },
    /** CPU µs of one empty script call (what batching job steps could save per step). */
    call_floor_cpu_us_per_call: floor,
    per_round: rounds,
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

const round2 = (x: number) => round(x, 2);

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
