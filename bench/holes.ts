/**
 * bench:holes: ingest into one asset whose every event leaves a hole (one-minute slices every
 * other minute, so every event is a segment of its own), through the queue and a daemon in its own
 * process, until the asset has BENCH_SEGMENTS segments (default 100,000). Prints JSON with the
 * ingest rate per band of BENCH_BAND segments (default 10,000) and the last band's rate over the
 * first's (goal: ≥ 0.8: the cost of an event must not grow with the asset's history), and the CPU
 * each event cost the daemon and its PostgreSQL backends in each band: on a machine shared with
 * other work the rate follows their load, the CPU per event much less. The same
 * stream into another asset runs first and is not counted (BENCH_WARMUP events, default 10,000),
 * so the first band times a warm daemon, not its JIT compiling the ingest path.
 *
 *   npm run bench:holes
 *   BENCH_SEGMENTS=40000 npm run bench:holes
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { parseConfig } from '../src/config/index.js';
import {
  createBenchDatabase,
  DATABASE_CONNECTION,
  dropPrefix,
  REDIS_URL,
  round,
  spawnDaemon,
  uniqueName,
} from './common.js';

const SEGMENTS = Number(process.env.BENCH_SEGMENTS ?? 100_000);
const BAND = Number(process.env.BENCH_BAND ?? 10_000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 10_000);
const ASSET = 'bench.holes';
const MINUTE = 60_000;
const T0 = Date.UTC(2025, 0, 1);
/** How often the asset's segment count is read while the daemon drains the queue. */
const POLL_MS = 100;
/** Gives up when the count stops moving for this long. */
const STALL_MS = 120_000;

if (!Number.isSafeInteger(SEGMENTS) || !Number.isSafeInteger(BAND) || BAND <= 0 || SEGMENTS < BAND) {
  throw new Error('BENCH_SEGMENTS and BENCH_BAND must be positive integers, BENCH_SEGMENTS ≥ BENCH_BAND');
}
if (!Number.isSafeInteger(WARMUP) || WARMUP < 0) throw new Error('BENCH_WARMUP must be an integer ≥ 0');

interface Sample {
  readonly ms: number;
  readonly segments: number;
  /** CPU seconds used so far by the daemon and its PostgreSQL backends. */
  readonly cpu: number;
}

/** CPU seconds a process has used (utime + stime, /proc/PID/stat); null once it is gone. */
function cpuOf(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/** One-minute slices every other minute: every event is a segment of its own. */
async function enqueueStream(producer: Queue, asset: string, n: number): Promise<void> {
  for (let i = 0; i < n; i += 1000) {
    await producer.addBulk(
      Array.from({ length: Math.min(1000, n - i) }, (_, k) => {
        const start = T0 + 2 * (i + k) * MINUTE;
        return {
          name: 'e',
          data: {
            asset,
            start: new Date(start).toISOString(),
            end: new Date(start + MINUTE).toISOString(),
            id: `s${i + k}`,
          },
        };
      }),
    );
  }
}

/** The time and CPU when the count reached `target`, interpolated between the samples around it. */
function reachedAt(samples: readonly Sample[], target: number): { ms: number; cpu: number } {
  const i = samples.findIndex((s) => s.segments >= target);
  if (i <= 0) return samples[Math.max(i, 0)]!;
  const a = samples[i - 1]!;
  const b = samples[i]!;
  const f = (target - a.segments) / (b.segments - a.segments);
  return { ms: a.ms + (b.ms - a.ms) * f, cpu: a.cpu + (b.cpu - a.cpu) * f };
}

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const prefix = uniqueName('crbench');
  const config = {
    database_url: db.url,
    redis_url: REDIS_URL,
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix },
  };
  const { queue } = parseConfig(config);
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const producer = new Queue(queue.name, { connection, prefix });
  let daemon: Awaited<ReturnType<typeof spawnDaemon>> | undefined;
  try {
    // Both streams are queued first, in order, so the producer never limits the rate.
    await enqueueStream(producer, 'bench.warmup', WARMUP);
    await enqueueStream(producer, ASSET, SEGMENTS);
    const loadBefore = loadAverage();
    daemon = await spawnDaemon(config);
    // Per process, the newest CPU reading: a backend that goes away keeps its last one.
    const cpuByPid = new Map<number, number>();
    const cpuNow = (pids: readonly number[]) => {
      for (const pid of [daemon!.pid, ...pids]) {
        const cpu = cpuOf(pid);
        if (cpu !== null) cpuByPid.set(pid, cpu);
      }
      return [...cpuByPid.values()].reduce((sum, x) => sum + x, 0);
    };
    const samples: Sample[] = [{ ms: performance.now(), segments: 0, cpu: cpuNow([]) }];
    let movedAt = performance.now();
    let analysedBand = 0;
    while (samples.at(-1)!.segments < SEGMENTS) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      const [row] = await db.sql<{ segments: number | null; pids: number[] }[]>`
        select (select segment_count from assets where name = ${ASSET}) as segments,
          array(select pid from pg_stat_activity
                where datname = current_database() and application_name = 'coverage-rollup') as pids`;
      const segments = row?.segments ?? 0;
      const ms = performance.now();
      if (segments !== samples.at(-1)!.segments) movedAt = ms;
      else if (ms - movedAt > STALL_MS) throw new Error(`stalled at ${segments} segments`);
      samples.push({ ms, segments, cpu: cpuNow(row?.pids ?? []) });
      // Statistics as autovacuum keeps them in a database that lives longer than this run (its
      // launcher may not visit a new database within a minute): plans follow the table's size.
      if (Math.floor(segments / BAND) > analysedBand) {
        analysedBand = Math.floor(segments / BAND);
        await db.sql`analyze segments`;
      }
    }
    const [index] = await db.sql<{ events: number; segments: number; rows: number }[]>`
      select event_count as events, segment_count as segments,
        (select count(*)::int from segments s where s.asset_id = a.id) as rows
      from assets a where name = ${ASSET}`;
    if (index?.events !== SEGMENTS || index.rows !== SEGMENTS) {
      throw new Error(`expected ${SEGMENTS} events and segments, found ${JSON.stringify(index)}`);
    }
    // Band k starts when the first commit lands (k = 0: not the daemon's start-up) or at k · BAND.
    const firstCommit = samples.find((s) => s.segments > 0)!;
    const bands = [];
    for (let lo = 0; lo < SEGMENTS; lo += BAND) {
      const hi = Math.min(lo + BAND, SEGMENTS);
      const from = reachedAt(samples, lo === 0 ? firstCommit.segments : lo);
      const to = reachedAt(samples, hi);
      const counted = lo === 0 ? hi - firstCommit.segments : hi - lo;
      const seconds = (to.ms - from.ms) / 1000;
      bands.push({
        segments: `${lo}-${hi}`,
        seconds: round(seconds, 2),
        events_per_second: Math.round(counted / seconds),
        cpu_us_per_event: Math.round(((to.cpu - from.cpu) * 1e6) / counted),
      });
    }
    const first = bands[0]!.events_per_second;
    const last = bands.at(-1)!.events_per_second;
    process.stdout.write(
      `${JSON.stringify(
        {
          benchmark: 'holes',
          database_connection: DATABASE_CONNECTION,
          events: SEGMENTS,
          warmup_events: WARMUP,
          segments: index.segments,
          batch_size: queue.batch_size,
          concurrency: queue.concurrency,
          total_seconds: round((samples.at(-1)!.ms - firstCommit.ms) / 1000, 1),
          bands,
          last_over_first: round(last / first, 3),
          last_over_fastest: round(last / Math.max(...bands.map((b) => b.events_per_second)), 3),
          cpu_per_event_last_over_first: round(
            bands.at(-1)!.cpu_us_per_event / bands[0]!.cpu_us_per_event,
            3,
          ),
          goal_last_over_first: 0.8,
          load_average: { before: loadBefore, after: loadAverage() },
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    await daemon?.stop();
    await producer.close();
    connection.disconnect();
    await dropPrefix(prefix);
    await db.drop();
  }
}

/** The machine's 1, 5 and 15-minute load averages: other work on it slows every band alike. */
const loadAverage = () => loadavg().map((x) => round(x, 2));

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
