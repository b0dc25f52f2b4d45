/**
 * bench:backends: the same events ingested through each queue backend in one run, and
 * the embedded default's start times. Rounds alternate Redis, PostgreSQL (the local server, the
 * queue in the index's own database) and the embedded PostgreSQL, so load from elsewhere on the
 * machine hits all alike; each round fills its queue first, then times our ingest worker from its
 * start until every job completed. Beside them, BullMQ's own Worker with a no-op processor on each
 * backend (same events, same concurrency): the cost of the queue alone. And the producer path
 * without the queue (issue 38): the built daemon on the embedded default, in a process of its own,
 * taking the same events as `POST /v1/events` batches of BENCH_HTTP_BATCH (500), BENCH_HTTP_CONCURRENCY
 * (4) requests in flight, timed from the first request to the last answer (each answers after its
 * commit; the bodies are serialised before the clock starts, as the queue rounds' jobs are in the
 * queue before theirs). Then the built daemon is started with no URLs in a fresh data
 * directory (initdb) and again on it (later starts), each timed from spawn to its 'listening' line.
 * Prints JSON: rates per round, medians, the ratios to Redis, start times, load average.
 *
 *   npm run build && npm run bench:backends
 *   BENCH_N=20000 BENCH_ROUNDS=3 BENCH_STARTS=3 npm run bench:backends
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CONFIG_ENV_VARS, type Config, parseConfig } from '../src/config/index.js';
import { resolveDatabase } from '../src/embedded/resolve.js';
import { startIngestWorker } from '../src/ingest/worker.js';
import { createMetrics } from '../src/metrics/registry.js';
import { queueConnection } from '../src/queue/backend.js';
import { connect, type Sql } from '../src/store/pg/db.js';
import { migrate } from '../src/store/upkeep/migrate.js';
import { packageRoot } from '../src/support/paths.js';
import {
  createBenchDatabase,
  dropPrefix,
  log,
  median,
  REDIS_URL,
  round,
  spawnDaemon,
  uniqueName,
} from './common.js';

const N = Number(process.env.BENCH_N ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const STARTS = Number(process.env.BENCH_STARTS ?? 3);
const HTTP_BATCH = Number(process.env.BENCH_HTTP_BATCH ?? 500);
const HTTP_CONCURRENCY = Number(process.env.BENCH_HTTP_CONCURRENCY ?? 4);
const TOKEN = 'bench-backends-token-0123456789';
const ASSETS = 50;
const FIVE_MINUTES = 5 * 60_000;

/**
 * 50 assets, each a stream of 5-minute slices, interleaved; every event distinct. The same shape
 * for every backend, under asset names of its own, so no round finds another's events in the index.
 */
function workload(round: number, tag: string): unknown[] {
  return Array.from({ length: N }, (_, n) => {
    const a = n % ASSETS;
    const start = Date.UTC(2025, 0, 1) + Math.floor(n / ASSETS) * FIVE_MINUTES;
    return {
      asset: `bench.${tag}.r${round}.${a}`,
      start: new Date(start).toISOString(),
      end: new Date(start + FIVE_MINUTES).toISOString(),
      id: `${tag}-r${round}-${n}`,
    };
  });
}

/** Fills the events queue, then times `drain` (started after the fill) until every job completed. */
async function timedRound(
  config: Config,
  round: number,
  tag: string,
  drain: (onCompleted: () => void) => { close(): Promise<void> },
): Promise<number> {
  const connection = queueConnection(config);
  const queue = connection.queue(config.queue.name, config.queue.prefix);
  const events = workload(round, tag);
  for (let i = 0; i < events.length; i += 1000) {
    await queue.addBulk(events.slice(i, i + 1000).map((data) => ({ name: 'event', data })));
  }
  let consumer: { close(): Promise<void> } | undefined;
  const seconds = await new Promise<number>((resolve) => {
    let done = 0;
    const t0 = performance.now();
    consumer = drain(() => {
      if (++done === N) resolve((performance.now() - t0) / 1000);
    });
  });
  await consumer!.close();
  await queue.close();
  await connection.deleteNamespace(config.queue.prefix);
  await connection.close();
  process.stderr.write(`round ${round} ${tag}: ${Math.round(N / seconds)} events/s\n`);
  return Math.round(N / seconds);
}

/** Our ingest worker draining the queue into the index. */
function ingestRound(config: Config, sql: Sql, round: number, tag: string): Promise<number> {
  return timedRound(config, round, tag, (onCompleted) => {
    const ingest = startIngestWorker(config, sql, log, createMetrics());
    ingest.onCompleted(onCompleted);
    return { close: () => ingest.close(30_000) };
  });
}

/**
 * BullMQ's own Worker with a processor that does nothing, on the same backend and events: what
 * BullMQ alone costs per job there, at our ingest's concurrency.
 */
function noopRound(config: Config, round: number, tag: string): Promise<number> {
  return timedRound(config, round, tag, (onCompleted) => {
    const connection = queueConnection(config);
    const worker = connection.worker(config.queue.name, config.queue.prefix, async () => null, {
      concurrency: config.queue.concurrency,
      removeOnComplete: (connection.backend === 'redis' ? { count: 1000 } : true) as { count: number },
    });
    worker.on('completed', onCompleted);
    return {
      close: async () => {
        await worker.close();
        await connection.close();
      },
    };
  });
}

/**
 * The same events as POST /v1/events batches into a daemon on the embedded default, which commits
 * each into the index before it answers: events/s from the first request to the last answer.
 */
async function httpRound(url: string, round: number, tag: string): Promise<number> {
  const events = workload(round, tag);
  const bodies: string[] = [];
  for (let i = 0; i < events.length; i += HTTP_BATCH)
    bodies.push(JSON.stringify(events.slice(i, i + HTTP_BATCH)));
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };
  let next = 0;
  let committed = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: HTTP_CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!;
        const res = await fetch(`${url}/v1/events`, { method: 'POST', headers, body });
        const answer = (await res.json()) as { results?: Array<{ status: string }> };
        if (res.status !== 200)
          throw new Error(`POST /v1/events answered ${res.status}: ${JSON.stringify(answer)}`);
        committed += answer.results!.filter((r) => r.status === 'committed').length;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  if (committed !== N) throw new Error(`${committed} of ${N} events committed`);
  process.stderr.write(`round ${round} ${tag}: ${Math.round(N / seconds)} events/s\n`);
  return Math.round(N / seconds);
}

/** Seconds from spawning the built daemon with no URLs to its 'listening' line; then SIGTERM. */
async function timedStart(dataDir: string): Promise<number> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of [...CONFIG_ENV_VARS, 'QUEUE_BACKEND']) delete env[key];
  Object.assign(env, { COVERAGE_ROLLUP_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info' });
  const t0 = performance.now();
  const child = spawn(process.execPath, ['dist/src/cli/main.js', 'start'], {
    cwd: packageRoot(),
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  const seconds = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('"msg":"listening"')) resolve((performance.now() - t0) / 1000);
    });
    void exited.then(([code]) => reject(new Error(`daemon exited (${code}) before listening`)));
  });
  child.kill('SIGTERM');
  await exited;
  return round(seconds, 2);
}

async function main(): Promise<void> {
  const load = [round(loadavg()[0]!, 2)];
  const db = await createBenchDatabase(20);
  const dir = mkdtempSync(join(tmpdir(), 'crbench-embedded-'));
  chmodSync(dir, 0o755); // run as root, the embedded server's user must reach it
  const base = { log_level: 'silent' as const, http: { port: 0 } };
  const redis = parseConfig({
    ...base,
    database_url: db.url,
    redis_url: REDIS_URL,
    queue: { prefix: uniqueName('crbench') },
  });
  const postgres = parseConfig({ ...base, database_url: db.url, queue: { prefix: uniqueName('crbench') } });
  const embedded = await resolveDatabase(
    parseConfig({ ...base, data_dir: join(dir, 'ingest'), queue: { prefix: 'crbench' } }),
    log,
    'command',
  );
  const embeddedSql = connect(embedded.config.database_url, { max: 20 });
  // The daemon as `npm start` runs it with no URLs: the embedded default, in a process of its own.
  const daemon = await spawnDaemon(
    { data_dir: join(dir, 'http'), api_tokens: [TOKEN], http: { port: 0 }, rollups: [] },
    { compiled: true },
  );
  const rates = {
    redis: [] as number[],
    postgres: [] as number[],
    embedded: [] as number[],
    embedded_http: [] as number[],
    bullmq_noop_redis: [] as number[],
    bullmq_noop_postgres: [] as number[],
  };
  try {
    await migrate(embeddedSql, log);
    for (let r = 0; r < ROUNDS; r++) {
      rates.redis.push(await ingestRound(redis, db.sql, r, 'redis'));
      rates.postgres.push(await ingestRound(postgres, db.sql, r, 'postgres'));
      rates.embedded.push(await ingestRound(embedded.config, embeddedSql, r, 'embedded'));
      rates.embedded_http.push(await httpRound(daemon.url, r, 'http'));
      rates.bullmq_noop_redis.push(await noopRound(redis, r, 'noop-redis'));
      rates.bullmq_noop_postgres.push(await noopRound(postgres, r, 'noop-postgres'));
    }
  } finally {
    await daemon.stop();
    await embeddedSql.end({ timeout: 5 });
    await embedded.release();
    await dropPrefix(redis.queue.prefix);
    await db.drop();
  }
  load.push(round(loadavg()[0]!, 2));
  const startsDir = join(dir, 'starts');
  const firstStart = await timedStart(startsDir);
  const laterStarts: number[] = [];
  for (let i = 0; i < STARTS; i++) laterStarts.push(await timedStart(startsDir));
  load.push(round(loadavg()[0]!, 2));
  rmSync(dir, { recursive: true, force: true });
  const m = {
    redis: median(rates.redis),
    postgres: median(rates.postgres),
    embedded: median(rates.embedded),
    embedded_http: median(rates.embedded_http),
    bullmq_noop_redis: median(rates.bullmq_noop_redis),
    bullmq_noop_postgres: median(rates.bullmq_noop_postgres),
  };
  const perRound = (k: 'postgres' | 'embedded' | 'embedded_http', over: 'redis' | 'embedded' = 'redis') =>
    rates[k].map((v, i) => round(v / rates[over][i]!, 3));
  const ratio = (k: 'postgres' | 'embedded' | 'embedded_http', over: 'redis' | 'embedded' = 'redis') => ({
    per_round: perRound(k, over),
    median: median(perRound(k, over)),
  });
  process.stdout.write(
    `${JSON.stringify(
      {
        benchmark: 'backends',
        events_per_round: N,
        rounds: ROUNDS,
        ingest_events_per_second: rates,
        median_events_per_second: m,
        postgres_over_redis: ratio('postgres'),
        embedded_over_redis: ratio('embedded'),
        embedded_http_over_redis: ratio('embedded_http'),
        embedded_http_over_embedded: ratio('embedded_http', 'embedded'),
        http: { batch: HTTP_BATCH, requests_in_flight: HTTP_CONCURRENCY },
        goals: { postgres_over_redis: 0.5, embedded_events_per_second: 2000, embedded_http_over_redis: 1.0 },
        embedded_start_seconds: {
          first_with_initdb: firstStart,
          later: laterStarts,
          later_median: median(laterStarts),
        },
        goals_start_seconds: { first: 10, later: 4 },
        loadavg_1m: { start: load[0], after_ingest: load[1], end: load[2] },
      },
      null,
      2,
    )}\n`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
