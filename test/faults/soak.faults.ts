import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import {
  daemonConfig,
  type EventJob,
  intFromEnv,
  median,
  Producer,
  pending,
  prng,
  queueCounts,
  RedisServer,
  report,
  round,
  rssBytes,
  seedFromEnv,
  sleep,
} from './lib.js';

/**
 * Soak (npm run soak): SOAK_EVENTS events (default 1,000,000) offered at a steady SOAK_RATE
 * (default 2,000/s, what this shared 2-core machine sustains) to one daemon process (ingest and
 * scheduler, one integer rollup), sampling its RSS and heap every SOAK_SAMPLE_S seconds (default
 * 5). RSS must stay flat: the median of the last quarter of the samples after warm-up (the first
 * fifth of the run) may exceed the first quarter's by at most 20 %. The index must hold one
 * segment per run of slices between holes, whatever the number of events. Quick run:
 * SOAK_EVENTS=100000 npm run soak.
 */

const procs = processHarness();
const N = intFromEnv('SOAK_EVENTS', 1_000_000);
const RATE = intFromEnv('SOAK_RATE', 2000);
const SAMPLE_MS = intFromEnv('SOAK_SAMPLE_S', 5) * 1000;
const SEED = seedFromEnv('SOAK_SEED');
const ASSETS = 20;
const WIDTH = 10;
const HOLE_RATE = 0.002;
const DUPLICATE_RATE = 0.01;
const MAX_GROWTH = 1.2;
const PREFIX = 'soak';

const db = await createTestDatabase();
const redis = await RedisServer.start();
afterAll(() => redis.destroy());

/** The stream, lazily: assets round-robin, each in slice order, holes skipped, some ids re-sent. */
function* events(random: () => number, stats: { holes: number; runs: number[]; duplicates: number }) {
  const slice = new Array<number>(ASSETS).fill(0);
  const lastWasHole = new Array<boolean>(ASSETS).fill(true);
  let produced = 0;
  for (let i = 0; produced < N; i++) {
    const a = i % ASSETS;
    const k = slice[a]!++;
    // Never a hole at an asset's first slice, so every asset's runs are counted from its start.
    if (k > 0 && random() < HOLE_RATE) {
      if (!lastWasHole[a]) stats.holes++;
      lastWasHole[a] = true;
      continue;
    }
    if (lastWasHole[a]) stats.runs[a] = (stats.runs[a] ?? 0) + 1;
    lastWasHole[a] = false;
    const data = {
      asset: `soak.${a}`,
      start: k * WIDTH,
      end: (k + 1) * WIDTH,
      version: 'v1',
      id: `s${a}-${k}`,
    };
    produced++;
    yield { jobId: `j${produced}`, data };
    if (produced < N && random() < DUPLICATE_RATE) {
      stats.duplicates++;
      produced++;
      yield { jobId: `j${produced}`, data: { ...data } };
    }
  }
}

interface Sample {
  t_s: number;
  rss_mb: number | null;
  heap_used_mb: number | null;
  backlog: number;
  ingested: number;
}

async function heapUsed(url: string): Promise<number | null> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = /^nodejs_heap_size_used_bytes (\S+)$/m.exec(text);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

describe('soak', () => {
  it('ingests a steady stream with flat memory and an index that grows with holes only', async () => {
    const proc = await procs.spawn({
      name: 'soak',
      config: daemonConfig({
        databaseUrl: db.url,
        redisUrl: redis.url,
        prefix: PREFIX,
        scheduler: true,
        assets: Array.from({ length: ASSETS }, (_, a) => ({ name: `soak.${a}`, domain: 'integer' })),
        rollups: [
          {
            id: 'soak-buckets',
            upstream: ['soak.0', 'soak.1'],
            every: 5_000,
            begin: 0,
            target: { type: 'queue', queue: 'downstream' },
          },
        ],
      }),
      readyTimeout: 60_000,
    });
    const sql = connect(db.url, { max: 2, applicationName: 'soak-checker' });
    const producer = new Producer(redis.url, 'asset-events', PREFIX);
    const queue = new Queue('asset-events', { connection: producer.connection, prefix: PREFIX });
    const stats = { holes: 0, runs: [] as number[], duplicates: 0 };
    const random = prng(SEED);

    const started = Date.now();
    const samples: Sample[] = [];
    let producing = true;
    const sampler = (async () => {
      for (let i = 0; producing || i % 2 === 1; i++) {
        const [row] = await sql<{ n: number }[]>`select coalesce(sum(event_count), 0)::int8 as n from assets`;
        const rss = rssBytes(proc.pid);
        const heap = await heapUsed(proc.url!);
        samples.push({
          t_s: round((Date.now() - started) / 1000, 1),
          rss_mb: rss === null ? null : round(rss / 2 ** 20, 1),
          heap_used_mb: heap === null ? null : round(heap / 2 ** 20, 1),
          backlog: pending(await queueCounts(queue)),
          ingested: row!.n,
        });
        await sleep(SAMPLE_MS);
      }
    })();

    let batch: EventJob[] = [];
    let sent = 0;
    for (const job of events(random, stats)) {
      batch.push(job);
      if (batch.length < 500) continue;
      await producer.add(batch);
      sent += batch.length;
      batch = [];
      const due = started + (sent / RATE) * 1000;
      if (Date.now() < due) await sleep(due - Date.now());
    }
    if (batch.length > 0) await producer.add(batch);
    const produceSeconds = (Date.now() - started) / 1000;

    // Drained: nothing pending in three checks in a row.
    let calm = 0;
    await waitFor(
      async () => {
        calm = pending(await queueCounts(queue)) === 0 ? calm + 1 : 0;
        return calm >= 3;
      },
      {
        timeout: Math.max(0, started + (N / RATE) * 1000 + 20 * 60_000 - Date.now()),
        interval: 500,
        what: 'the soak queue to drain',
      },
    );
    producing = false;
    await sampler;

    const [index] = await sql<
      { events: number; segments: number; first: Date; last: Date; triggers: number }[]
    >`
      select (select count(*)::int from events) as events, (select count(*)::int from segments) as segments,
        (select min(ingested_at) from events) as first, (select max(ingested_at) from events) as last,
        (select count(*)::int from triggers) as triggers`;
    const [failed] = [(await queueCounts(queue)).failed];
    const alive = proc.running;
    await producer.close();
    await sql.end({ timeout: 5 });
    const exit = await proc.stop(30_000);

    // Memory: drop the warm-up (first fifth of the run), compare the last quarter with the first.
    const warmupS = samples.at(-1)!.t_s / 5;
    const steady = samples.filter((s) => s.t_s >= warmupS && s.rss_mb !== null);
    const q = Math.max(1, Math.floor(steady.length / 4));
    const firstQuarter = median(steady.slice(0, q).map((s) => s.rss_mb!));
    const lastQuarter = median(steady.slice(-q).map((s) => s.rss_mb!));
    const growth = lastQuarter / firstQuarter;
    const heapFirst = median(
      steady.slice(0, q).flatMap((s) => (s.heap_used_mb === null ? [] : [s.heap_used_mb])),
    );
    const heapLast = median(
      steady.slice(-q).flatMap((s) => (s.heap_used_mb === null ? [] : [s.heap_used_mb])),
    );
    const expectedSegments = stats.runs.reduce((a, b) => a + b, 0);
    const uniqueEvents = N - stats.duplicates;
    const ingestSeconds = (index!.last.getTime() - index!.first.getTime()) / 1000;

    const checks = {
      rss_flat: growth <= MAX_GROWTH,
      all_unique_events_logged: index!.events === uniqueEvents,
      segments_equal_runs_between_holes: index!.segments === expectedSegments,
      no_failed_jobs: failed === 0,
      process_stayed_up: alive,
      clean_exit: exit.code === 0,
    };
    const ok = Object.values(checks).every(Boolean);
    report('soak', {
      suite: 'soak',
      ok,
      seed: SEED,
      events_offered: N,
      offered_rate_per_s: RATE,
      achieved_offer_rate_per_s: round(N / produceSeconds, 0),
      ingest_rate_per_s: round(index!.events / ingestSeconds, 0),
      seconds: round((Date.now() - started) / 1000, 1),
      memory: {
        warmup_s: round(warmupS, 1),
        rss_first_quarter_median_mb: firstQuarter,
        rss_last_quarter_median_mb: lastQuarter,
        rss_growth_ratio: round(growth, 3),
        rss_max_growth_allowed: MAX_GROWTH,
        rss_max_mb: Math.max(...samples.map((s) => s.rss_mb ?? 0)),
        heap_used_first_quarter_median_mb: heapFirst,
        heap_used_last_quarter_median_mb: heapLast,
      },
      index: {
        assets: ASSETS,
        unique_events: uniqueEvents,
        duplicates_sent: stats.duplicates,
        logged_events: index!.events,
        holes: stats.holes,
        segments: index!.segments,
        expected_segments: expectedSegments,
        events_per_segment: round(index!.events / index!.segments, 1),
        rollup_triggers: index!.triggers,
      },
      backlog_max: Math.max(...samples.map((s) => s.backlog)),
      checks,
      series: samples,
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, true])));
  });
});
