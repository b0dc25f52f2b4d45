import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/store/pg/db.js';
import { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { createTestDatabase } from '../helpers/db.js';
import { logTime, processHarness } from '../helpers/process.js';
import {
  daemonConfig,
  drainQueue,
  errorLines,
  intFromEnv,
  Producer,
  queueCounts,
  RedisServer,
  report,
  round,
  scrape,
  settleScheduler,
  sleep,
} from './lib.js';
import { midnightDaysAgo, SliceStream } from './slices.js';

/**
 * A partition without resets (npm run test:partition): two daemon processes on one database and
 * one Redis; instance A reaches PostgreSQL through a proxy that, for PARTITION_SECONDS (default
 * 60), forwards no byte either way and closes nothing, while its Redis stays reachable and events
 * keep arriving for 24 assets (PARTITION_RATE per second, default 40, with 3 % re-sent). A holds
 * the scheduler lease when it is cut off. Checks, printed as JSON: ≥ 95 % of the events sent during
 * the partition visible in the index within 10 s of being sent (B alone can commit them then);
 * after the heal no event lost, none twice, the index equal to range_agg over every slice sent,
 * exactly one trigger per covered period, every trigger delivered, no job failed or dead-lettered.
 */

const procs = processHarness();
const RATE = intFromEnv('PARTITION_RATE', 40);
const PARTITION_S = intFromEnv('PARTITION_SECONDS', 60);
const WARM_S = 15;
const TAIL_S = 20;
const PREFIX = 'partition';
const TARGET_QUEUE = 'downstream';
const ASSETS = Array.from({ length: 24 }, (_, i) => `part.t${String(i).padStart(2, '0')}`);
const START_MS = midnightDaysAgo(3);
const PAUSED = 'PostgreSQL does not answer: ingest paused, held jobs given back to the queue';
const RESUMED = 'PostgreSQL answers again: ingest resumed';

const db = await createTestDatabase();
const redis = await RedisServer.start();
afterAll(() => redis.destroy());
const pg = new URL(db.url);
const proxy = await BlackholeProxy.start({ host: pg.hostname, port: Number(pg.port || 5432) });
afterAll(() => proxy.close());

/** Four hourly rollups over three assets each; the other twelve assets only feed the index. */
const rollups = Array.from({ length: 4 }, (_, k) => ({
  id: `hourly-${k}`,
  upstream: ASSETS.slice(3 * k, 3 * k + 3),
  every: 'hour',
  begin: new Date(START_MS).toISOString(),
  rerun: 'on_update',
  target: { type: 'queue', queue: TARGET_QUEUE },
}));

const config = (databaseUrl: string) =>
  daemonConfig({
    databaseUrl,
    redisUrl: redis.url,
    prefix: PREFIX,
    scheduler: true,
    assets: ASSETS.map((name) => ({ name, domain: 'time' })),
    rollups,
  });

describe('one of two instances cut off from PostgreSQL without resets', () => {
  it('the healthy instance indexes the stream meanwhile; after the heal nothing is lost or doubled', async () => {
    const started = Date.now();
    const elapsed = () => round((Date.now() - started) / 1000, 1);
    const sql = connect(db.url, { max: 3, applicationName: 'partition-checker' });

    // A first, so it holds the scheduler lease when it is cut off.
    const a = await procs.spawn({ name: 'a-cut', config: config(proxy.proxiedUrl(db.url)) });
    await a.waitForLog('acquired the scheduler lease');
    const b = await procs.spawn({ name: 'b-healthy', config: config(db.url) });

    // ---- the paced producer; a first send's time per (asset, id) ----
    const producer = new Producer(redis.url, 'asset-events', PREFIX);
    const stream = new SliceStream(ASSETS, START_MS);
    const { sent } = stream;
    stream.start(producer, RATE);

    // ---- first visibility of each event in the index, polled ----
    const seen = new Map<string, number>();
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const rows = await sql<{ name: string; event_id: string }[]>`
          select a.name, event_id_text(e.event_id, e.event_id_hex) as event_id from events e join assets a on a.id = e.asset_id`;
        const now = Date.now();
        for (const r of rows) {
          const key = `${r.name}\u0000${r.event_id}`;
          if (!seen.has(key)) seen.set(key, now);
        }
        await sleep(200); // the poll period bounds the measurement's resolution
      }
    })();

    // ---- the partition ----
    await sleep(WARM_S * 1000);
    const aLines = a.lines.length;
    const cutAt = Date.now();
    proxy.blackhole();
    const pausedLine = await a.waitForLog(PAUSED, { from: aLines, timeout: 30_000 });
    const lostLease = await a
      .waitForLog('lost the scheduler lease; stopped triggering', { from: aLines, timeout: 30_000 })
      .catch(() => null);
    const takeover = await b
      .waitForLog('acquired the scheduler lease', { timeout: 30_000 })
      .catch(() => null);
    const midPaused = await scrape(a.url, 'coverage_rollup_ingest_paused_for_postgres');
    const cutFor = cutAt + PARTITION_S * 1000 - Date.now();
    if (cutFor > 0) await sleep(cutFor);
    const healAt = Date.now();
    proxy.heal();
    const resumedLine = await a.waitForLog(RESUMED, { from: aLines, timeout: 30_000 });
    await sleep(TAIL_S * 1000);
    await stream.stop();
    const streamSeconds = elapsed();

    // ---- drain and settle ----
    const events = new Queue('asset-events', { connection: producer.connection, prefix: PREFIX });
    await drainQueue(events, 120_000);
    await settleScheduler(sql, 120_000);
    polling = false;
    await poll;

    // ---- checks ----
    // 1. Latency of the events sent during the partition: first seen in the index minus sent.
    const during = [...sent.entries()].filter(([, e]) => e.sentAt >= cutAt && e.sentAt < healAt);
    const latencies = during.map(([key, e]) => (seen.get(key) ?? Number.POSITIVE_INFINITY) - e.sentAt);
    const within10s = latencies.filter((ms) => ms <= 10_000).length;
    const sorted = [...latencies].sort((x, y) => x - y);
    const pct = (p: number) =>
      round((sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0) / 1000, 2);

    // 2. Nothing lost, nothing twice.
    const logged = await sql<{ name: string; event_id: string }[]>`
      select a.name, event_id_text(e.event_id, e.event_id_hex) as event_id from events e join assets a on a.id = e.asset_id`;
    const inLog = new Set(logged.map((r) => `${r.name}\u0000${r.event_id}`));
    const lost = [...sent.keys()].filter((k) => !inLog.has(k));
    const loggedTwice = logged.length - inLog.size;
    const [overlap] = await sql<{ n: number }[]>`
      select count(*)::int as n from segments s1 join segments s2
        on s1.asset_id = s2.asset_id and s1.id < s2.id and s1.span && s2.span`;

    // 3. The index equals range_agg over every slice sent (not only over the log).
    await stream.loadOracle(sql);
    const mismatched = await stream.mismatchedAssets(sql);

    // 4. Exactly one trigger per period its upstreams cover, by the oracle; none for another.
    // Every hour the stream reached, from the oracle alone (not from the periods table).
    const coveredPeriods = await stream.hourlyPeriods(sql, rollups);
    const covered = coveredPeriods.filter((p) => p.covered);
    const notOnce = covered.filter((p) => p.triggers !== 1);
    const uncoveredTriggered = coveredPeriods.filter((p) => !p.covered && p.triggers > 0);
    const [outbox] = await sql<{ decisions: number; undelivered: number }[]>`
      select count(*)::int as decisions, count(*) filter (where delivered_at is null)::int as undelivered from triggers`;
    const target = new Queue(TARGET_QUEUE, { connection: producer.connection, prefix: PREFIX });
    const targetJobs = (await queueCounts(target)).waiting;

    const finalCounts = await queueCounts(events);
    const dlq = new Queue('asset-events-dead', { connection: producer.connection, prefix: PREFIX });
    const deadLettered = (await queueCounts(dlq)).waiting;
    const returned = await scrape(a.url, 'coverage_rollup_ingest_jobs_returned_total');
    const pausedAfter = await scrape(a.url, 'coverage_rollup_ingest_paused_for_postgres');
    const ingestedByB = await scrape(b.url, 'coverage_rollup_events_ingested_total{status="committed"}');

    await producer.close();
    await target.close();
    await dlq.close();
    await events.close();
    const exits = await procs.stopAll(30_000);
    await sql.end({ timeout: 5 });

    const checks = {
      share_within_10s_below_95_percent: within10s / Math.max(1, during.length) >= 0.95 ? 0 : 1,
      events_lost: lost.length,
      events_logged_twice: loggedTwice,
      overlapping_segments: overlap!.n,
      index_vs_oracle_mismatched_assets: mismatched.length,
      covered_periods_not_triggered_exactly_once: notOnce.length,
      uncovered_periods_triggered: uncoveredTriggered.length,
      undelivered_triggers: outbox!.undelivered,
      target_jobs_vs_decisions: Math.abs(targetJobs - outbox!.decisions),
      jobs_failed: finalCounts.failed,
      dead_lettered: deadLettered,
      nonzero_exits: exits.filter((e) => e.code !== 0).length,
      a_not_paused_during_partition: midPaused === 1 ? 0 : 1,
      a_still_paused_after_heal: pausedAfter === 0 ? 0 : 1,
    };
    const ok = Object.values(checks).every((v) => v === 0);
    report('partition', {
      suite: 'test:partition',
      ok,
      offered_rate_per_s: RATE,
      partition_s: round((healAt - cutAt) / 1000, 1),
      seconds: { stream: streamSeconds, total: elapsed() },
      events: { sent_unique: sent.size, resent_duplicates: stream.resent, during_partition: during.length },
      during_partition: {
        indexed_within_10s: within10s,
        share_within_10s: round(within10s / Math.max(1, during.length), 4),
        latency_s: { p50: pct(0.5), p95: pct(0.95), p99: pct(0.99), max: pct(1) },
      },
      instance_a: {
        paused_after_cut_s: round((logTime(pausedLine) - cutAt) / 1000, 2),
        jobs_given_back_at_pause: pausedLine.returned,
        jobs_returned_total: returned,
        lost_lease_after_cut_s: lostLease ? round((logTime(lostLease) - cutAt) / 1000, 2) : null,
        resumed_after_heal_s: round((logTime(resumedLine) - healAt) / 1000, 2),
        paused_gauge_mid_partition: midPaused,
        paused_gauge_after_heal: pausedAfter,
      },
      instance_b: {
        took_lease_after_cut_s: takeover ? round((logTime(takeover) - cutAt) / 1000, 2) : null,
        events_committed: ingestedByB,
      },
      triggers: { decisions: outbox!.decisions, covered_periods: covered.length, target_jobs: targetJobs },
      checks,
      details: {
        lost: lost.slice(0, 10),
        mismatched: mismatched.slice(0, 3),
        not_once: notOnce.slice(0, 10),
        uncovered_triggered: uncoveredTriggered.slice(0, 10),
        final_queue_counts: finalCounts,
        exits,
        error_log_lines: errorLines(procs.all)
          .slice(0, 10)
          .map(({ process, line }) => ({ process, msg: line.msg })),
      },
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, 0])));
  });
});
