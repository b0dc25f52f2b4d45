/**
 * Coverage reads under ingest, without and with a read replica (issue 16): the daemon, in its own
 * process, ingests BENCH_EVENTS_PER_S (2,000) events/s from the queue while a client asks
 * BENCH_QUERIES_PER_S (500) coverage questions/s, open loop (latency counts from when a question
 * was due, so a slow answer delays none of the next ones' clocks). Three modes in one go, each on a
 * fresh database of one local primary with a streaming replica (test/helpers/pg-replica.ts):
 * reads on the primary; database_read_url on the replica; and the replica read by a second,
 * API-only instance (`queue.consume: []`), so answers never wait behind an ingest batch in the
 * same event loop. Goal: with a replica, p99 ≤ 20 ms.
 * Both servers share this machine, so the replica takes CPU from the primary rather than adding a
 * machine's worth: the figures are a floor for a real second host. Prints JSON.
 *
 *   npm run bench:replica
 *   BENCH_SECONDS=60 BENCH_ASSETS=500 npm run bench:replica
 */
import { Agent, get } from 'node:http';
import { loadavg } from 'node:os';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { normalizeEvent } from '../src/core/events/events.js';
import { commitEvents } from '../src/store/assets/commit.js';
import { connect, type Sql } from '../src/store/pg/db.js';
import { migrate } from '../src/store/upkeep/migrate.js';
import { startReplicaPair } from '../test/helpers/pg-replica.js';
import { dropPrefix, log, quantile, REDIS_URL, round, spawnDaemon, uniqueName } from './common.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const WARMUP_SECONDS = 3;
const EVENTS_PER_S = Number(process.env.BENCH_EVENTS_PER_S ?? 2000);
const QUERIES_PER_S = Number(process.env.BENCH_QUERIES_PER_S ?? 500);
const ASSETS = Number(process.env.BENCH_ASSETS ?? 200);
/** Minutes of history every asset has before the run, so every question finds its asset. */
const SEEDED_MINUTES = 60;
const TICK_MS = 2;
const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;

/** Calls `fire(n)` every TICK_MS with how many are due since the start at `perSecond`. */
function openLoop(perSecond: number, fire: (n: number, dueAt: (i: number) => number) => void) {
  const started = performance.now();
  let sent = 0;
  const timer = setInterval(() => {
    // Question k is due at k / perSecond, so by now floor(elapsed * perSecond) + 1 of them are.
    const due = Math.floor(((performance.now() - started) / 1000) * perSecond) + 1;
    const first = sent;
    if (due > sent) fire(due - sent, (i) => started + ((first + i) * 1000) / perSecond);
    sent = due;
  }, TICK_MS);
  return () => clearInterval(timer);
}

interface Mode {
  readonly name: 'primary_only' | 'with_replica' | 'with_replica_api_instance';
  readonly replica: boolean;
  /** Coverage questions go to a second instance that ingests nothing. */
  readonly apiInstance: boolean;
}

/** Asset `a`'s event for minute `minute` of the day. */
function event(a: number, minute: number) {
  const start = T0 + minute * MINUTE;
  return {
    asset: `bench.asset${a}`,
    start: new Date(start).toISOString(),
    end: new Date(start + MINUTE).toISOString(),
  };
}

/** One mode on a fresh, seeded database of the pair. */
async function runMode(mode: Mode, pair: Awaited<ReturnType<typeof startReplicaPair>>) {
  const database = uniqueName('cr_bench_replica');
  await pair.createDatabase(database);
  const primary = connect(pair.primaryUrl(database), { max: 1, applicationName: 'bench' });
  try {
    await migrate(primary, log);
    for (let minute = 0; minute < SEEDED_MINUTES; minute++) {
      const batch = Array.from({ length: ASSETS }, (_, a) =>
        normalizeEvent(event(a, minute), { maxPayloadBytes: 65_536 }),
      );
      await commitEvents(primary, batch);
    }
    const readUrl = mode.replica ? pair.replicaUrl(database) : undefined;
    return await underLoad(primary, pair.primaryUrl(database), readUrl, mode.apiInstance);
  } finally {
    await primary.end({ timeout: 1 });
  }
}

async function underLoad(
  primary: Sql,
  databaseUrl: string,
  readUrl: string | undefined,
  apiInstance: boolean,
) {
  const prefix = uniqueName('crbench');
  const daemon = await spawnDaemon({
    database_url: databaseUrl,
    ...(readUrl ? { database_read_url: readUrl } : {}),
    redis_url: REDIS_URL,
    http: { host: '127.0.0.1', port: 0 },
    queue: { prefix },
    assets: [],
  });
  const reader = apiInstance
    ? await spawnDaemon({
        database_url: databaseUrl,
        ...(readUrl ? { database_read_url: readUrl } : {}),
        redis_url: REDIS_URL,
        http: { host: '127.0.0.1', port: 0 },
        queue: { prefix, consume: [] },
        assets: [],
      })
    : daemon;
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue('asset-events', { connection, prefix });
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  try {
    // Each asset advances one minute per event, so coverage grows at the head of every window.
    const next = new Array<number>(ASSETS).fill(SEEDED_MINUTES);
    let produced = 0;
    let produceErrors = 0;
    const stopProducing = openLoop(EVENTS_PER_S, (n) => {
      const jobs = Array.from({ length: n }, () => {
        const a = produced++ % ASSETS;
        return { name: 'event', data: event(a, next[a]!++) };
      });
      queue.addBulk(jobs).catch(() => produceErrors++);
    });

    const latencies: number[] = [];
    let errors = 0;
    let fromReplica = 0;
    let measuring = false;
    let asked = 0;
    const ask = (dueAt: number) => {
      const asset = `bench.asset${asked++ % ASSETS}`;
      const query = 'start=2026-01-01T00:00:00Z&end=2026-01-02T00:00:00Z';
      const counted = measuring;
      get(`${reader.url}/v1/assets/${asset}/coverage?${query}`, { agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          if (!counted) return;
          if (res.statusCode !== 200) errors++;
          else latencies.push(performance.now() - dueAt);
          if (Buffer.concat(chunks).includes('"as_of"')) fromReplica++;
        });
      }).on('error', () => {
        if (counted) errors++;
      });
    };
    const stopAsking = openLoop(QUERIES_PER_S, (n, dueAt) => {
      for (let i = 0; i < n; i++) ask(dueAt(i));
    });

    await new Promise((r) => setTimeout(r, WARMUP_SECONDS * 1000));
    const count = async () => (await primary<[{ n: number }]>`select count(*)::int as n from events`)[0].n;
    const eventsBefore = await count();
    const started = performance.now();
    measuring = true;
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    measuring = false;
    const elapsed = (performance.now() - started) / 1000;
    const eventsAfter = await count();
    stopAsking();
    stopProducing();
    const readyz = (await (await fetch(`${daemon.url}/readyz`)).json()) as { replica?: unknown };
    const backlog = await queue.getJobCounts('waiting', 'active');
    latencies.sort((a, b) => a - b);
    return {
      answers: latencies.length,
      answers_from_replica: fromReplica,
      errors,
      queries_per_second: round(latencies.length / elapsed, 1),
      events_ingested_per_second: Math.round((eventsAfter - eventsBefore) / elapsed),
      queue_backlog_at_end: backlog.waiting ?? 0,
      produce_errors: produceErrors,
      p50_ms: round(quantile(latencies, 0.5) ?? 0, 1),
      p99_ms: round(quantile(latencies, 0.99) ?? 0, 1),
      max_ms: round(latencies[latencies.length - 1] ?? 0, 1),
      ...(readyz.replica ? { replica_at_end: readyz.replica } : {}),
    };
  } finally {
    agent.destroy();
    await daemon.stop();
    if (reader !== daemon) await reader.stop();
    await queue.close();
    connection.disconnect();
    await dropPrefix(prefix);
  }
}

async function main(): Promise<void> {
  const pair = await startReplicaPair();
  const results: Record<string, unknown> = {};
  try {
    for (const mode of [
      { name: 'primary_only', replica: false, apiInstance: false },
      { name: 'with_replica', replica: true, apiInstance: false },
      { name: 'with_replica_api_instance', replica: true, apiInstance: true },
    ] as const satisfies readonly Mode[]) {
      results[mode.name] = await runMode(mode, pair);
    }
  } finally {
    await pair.stop();
  }
  const result = {
    benchmark: 'replica',
    seconds: SECONDS,
    target_events_per_second: EVENTS_PER_S,
    target_queries_per_second: QUERIES_PER_S,
    assets: ASSETS,
    window: '2026-01-01/2026-01-02',
    ...results,
    load_average_at_end: loadavg().map((l) => round(l, 2)),
    goal: { with_replica_p99_ms: 20 },
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
