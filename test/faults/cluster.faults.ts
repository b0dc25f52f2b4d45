import { Queue } from 'bullmq';
import type { Cluster } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { groupOf } from '../../src/core/events/routing.js';
import { type QueueGroup, queueGroups } from '../../src/queue/groups.js';
import { redisConnection } from '../../src/queue/redis.js';
import { connect } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';
import {
  daemonConfig,
  type EventJob,
  errorLines,
  intFromEnv,
  pending,
  queueCounts,
  report,
  round,
  seedFromEnv,
  sleep,
} from './lib.js';
import { buildStream, intAsset, timeAsset } from './stream.js';

/**
 * Redis Cluster fail-over under a stream (npm run test:cluster): a real Cluster of 3 masters and
 * 3 replicas from `redis-server`, two daemon processes (the built `coverage-rollup start`, both
 * with the scheduler, so one holds the lease) consuming 3 queue groups, and a producer routing by
 * asset. At 40 % of the stream it SIGKILLs the master serving group 0; its replica takes over and
 * the killed node is restarted (it rejoins as a replica). Then it checks, and prints as JSON:
 * no acknowledged event lost, the index equal to range_agg over the event log, one decision per
 * (rollup, period, generation), every decision at the queue target, and how long after the kill
 * group 0's new events were ingested again.
 *
 * The producer counts an event acknowledged once Redis took it AND (WAIT) a replica has it, or
 * the master has no replica left to wait for: Redis replicates asynchronously, so an add that only
 * the killed master saw is lost by Redis itself, which no consumer can make up for.
 *
 * CLUSTER_SEED, CLUSTER_RATE (events/s offered, default 1500), CLUSTER_SCALE (default 1: ~25,000
 * events).
 */

const procs = processHarness();
const SEED = seedFromEnv('CLUSTER_SEED');
const RATE = intFromEnv('CLUSTER_RATE', 1500);
const SCALE = intFromEnv('CLUSTER_SCALE', 1);
const PREFIX = 'cf';
const GROUPS = 3;
const TARGET = { type: 'queue', queue: 'downstream', prefix: '{cf-runs}' };

const db = await createTestDatabase();
const cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 });
afterAll(() => cluster.stop());

const DAY = 86_400_000;
const timeStartMs = Math.floor(Date.now() / DAY) * DAY - 3 * DAY;
const stream = buildStream({
  seed: SEED,
  intAssets: 12,
  intSlices: Math.round(1500 * SCALE),
  intWidth: 100,
  timeAssets: 3,
  timeSlices: Math.round(24 * 60 * SCALE),
  timeStartMs,
  holesPerAsset: 2,
  lateFillRate: 0.005,
  duplicateRate: 0.03,
  reprocess: true,
});
const rollups = [
  ...Array.from({ length: 4 }, (_, k) => ({
    id: `ints-${k}`,
    upstream: [intAsset(3 * k), intAsset(3 * k + 1), intAsset(3 * k + 2)],
    every: 10_000,
    begin: 0,
    rerun: 'on_update',
    target: TARGET,
  })),
  {
    id: 'time-hourly',
    upstream: [timeAsset(0), timeAsset(1), timeAsset(2)],
    every: 'hour',
    begin: new Date(timeStartMs).toISOString(),
    rerun: 'on_update',
    target: TARGET,
  },
];
const config = daemonConfig({
  databaseUrl: db.url,
  redisUrl: cluster.url,
  prefix: PREFIX,
  scheduler: true,
  queue: { groups: GROUPS },
  assets: [
    ...stream.intAssets.map((name) => ({ name, domain: 'integer' })),
    ...stream.timeAssets.map((name) => ({ name, domain: 'time' })),
  ],
  rollups,
});
const groups = queueGroups(parseConfig(config).queue);

/** Adds each job to its asset's group; retried (same job ids) until taken and replicated. */
class ClusterProducer {
  readonly redis = redisConnection(cluster.url) as Cluster;
  readonly queues = groups.map((g) => new Queue(g.name, { connection: this.redis, prefix: g.prefix }));
  /** When each (asset, id) was acknowledged. */
  readonly ackedAt = new Map<string, number>();
  retries = 0;
  private slots: number[] = [];

  async start(): Promise<void> {
    this.redis.on('error', () => {});
    for (const q of this.queues) q.on('error', () => {});
    this.slots = await Promise.all(
      groups.map(async (g) => Number(await this.redis.call('CLUSTER', 'KEYSLOT', g.prefix))),
    );
  }

  async add(jobs: readonly EventJob[]): Promise<void> {
    const byGroup = new Map<number, EventJob[]>();
    for (const j of jobs) {
      const g = groupOf(String(j.data.asset), GROUPS);
      byGroup.set(g, [...(byGroup.get(g) ?? []), j]);
    }
    await Promise.all([...byGroup].map(([g, list]) => this.addToGroup(g, list)));
  }

  private async addToGroup(group: number, jobs: readonly EventJob[]): Promise<void> {
    const deadline = Date.now() + 120_000;
    for (;;) {
      try {
        await this.queues[group]!.addBulk(
          jobs.map((j) => ({ name: 'e', data: j.data, opts: { jobId: j.jobId } })),
        );
        await this.replicated(group);
        const now = Date.now();
        for (const j of jobs) this.ackedAt.set(`${j.data.asset}\u0000${j.data.id}`, now);
        return;
      } catch (error) {
        this.retries++;
        if (Date.now() > deadline) throw error;
        await sleep(100); // a retry delay while the shard fails over, not a wait for a condition
      }
    }
  }

  /** WAIT on the group's master for one replica, unless it has none to wait for. */
  private async replicated(group: number): Promise<void> {
    const key = this.redis.slots[this.slots[group]!]?.[0];
    const master = this.redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === key);
    if (!master) throw new Error(`no master known for group ${group}`);
    if ((await master.wait(1, 200)) >= 1) return;
    const role = (await master.role()) as [string, number, unknown[]];
    if (role[0] === 'master' && role[2].length === 0) return;
    throw new Error(`group ${group}: not replicated yet`);
  }

  async close(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.close().catch(() => {})));
    this.redis.disconnect();
  }
}

describe('queue groups on a Redis Cluster whose master is killed during a stream', () => {
  it('loses nothing, decides once, delivers, and ingests again within seconds', async () => {
    const started = Date.now();
    const elapsed = () => round((Date.now() - started) / 1000, 1);
    const sql = connect(db.url, { max: 4, applicationName: 'cluster-checker' });
    const daemons = [
      await procs.spawn({ name: 'daemon-a', config, readyTimeout: 90_000 }),
      await procs.spawn({ name: 'daemon-b', config, readyTimeout: 90_000 }),
    ];
    const producer = new ClusterProducer();
    await producer.start();

    const total = stream.jobs.length;
    let sent = 0;
    const produce = (async () => {
      const t0 = Date.now();
      for (let i = 0; i < total; i += 250) {
        const jobs = stream.jobs.slice(i, i + 250);
        await producer.add(jobs);
        sent = i + jobs.length;
        const due = t0 + (sent / RATE) * 1000;
        if (Date.now() < due) await sleep(due - Date.now());
      }
    })();
    while (sent < 0.4 * total) await sleep(50);

    // ---- the fault: SIGKILL the master of group 0, restart it once its replica took over ----
    const slot = Number(await producer.redis.call('CLUSTER', 'KEYSLOT', groups[0]!.prefix));
    const victim = await cluster.masterOf(slot);
    const killedAt = Date.now();
    await victim.kill();
    let failoverMs = Number.NaN;
    for (;;) {
      const master = await cluster.masterOf(slot).catch(() => victim);
      if (master !== victim) {
        failoverMs = Date.now() - killedAt;
        break;
      }
      if (Date.now() - killedAt > 30_000) throw new Error('no fail-over within 30 s');
      await sleep(50);
    }
    await victim.restart();
    const rejoinedMs = Date.now() - killedAt;
    const progressAtKill = round(sent / total, 3);
    await produce;
    const streamSeconds = elapsed();

    // ---- drain every group, then let the scheduler settle ----
    const events = groups.map(
      (g: QueueGroup) => new Queue(g.name, { connection: producer.redis, prefix: g.prefix }),
    );
    for (let calm = 0; calm < 3; ) {
      const counts = await Promise.all(events.map(queueCounts));
      calm = counts.every((c) => pending(c) === 0) ? calm + 1 : 0;
      if (Date.now() - started > 600_000) throw new Error(`queues did not drain: ${JSON.stringify(counts)}`);
      await sleep(500);
    }
    for (let calm = 0; calm < 3; ) {
      const [s] = await sql<{ busy: number }[]>`
        select (select count(*)::int from periods where dirty or manual_requested)
          + (select count(*)::int from triggers where delivered_at is null and failed_at is null)
          + (select count(*)::int from rollup_cursors c join assets a on a.name = c.asset_name where c.seq < a.last_seq)
          as busy`;
      calm = s!.busy === 0 ? calm + 1 : 0;
      if (Date.now() - started > 600_000) throw new Error('scheduler did not settle');
      await sleep(1000);
    }

    // ---- checks ----
    const logged = await sql<{ name: string; event_id: string; ingested_at: Date }[]>`
      select a.name, event_id_text(e.event_id, e.event_id_hex) as event_id, e.ingested_at from events e join assets a on a.id = e.asset_id`;
    const inLog = new Map(logged.map((r) => [`${r.name}\u0000${r.event_id}`, r.ingested_at.getTime()]));
    const lost = [...producer.ackedAt.keys()].filter((k) => !inLog.has(k));
    // Ingest resumed for group 0: the first of its events indexed once its replica serves the slot
    // (an event acknowledged after the kill may have been added, and even indexed, before it: the
    // acknowledgement waits for WAIT 1, so acknowledgement times cannot date the resumption).
    const group0After = logged
      .filter((r) => groupOf(r.name, GROUPS) === 0)
      .map((r) => r.ingested_at.getTime())
      .filter((t) => t > killedAt + failoverMs);
    const resumeMs = group0After.length > 0 ? Math.min(...group0After) - killedAt : Number.NaN;
    // The producer's share of that: its first group-0 acknowledgement after the kill.
    const group0AckedAfter = [...producer.ackedAt]
      .filter(([k, at]) => at > killedAt && groupOf(k.split('\u0000')[0]!, GROUPS) === 0)
      .map(([, at]) => at - killedAt);
    const producerResumedMs = group0AckedAfter.length > 0 ? Math.min(...group0AckedAfter) : Number.NaN;
    const mismatched = await sql`
      with ev as (
        select asset_id, range_agg(int8range(lo, hi)) as m from events
        where not replay and hi > lo group by asset_id),
      sg as (select asset_id, range_agg(span) as m from segments group by asset_id)
      select a.name from assets a left join ev on ev.asset_id = a.id left join sg on sg.asset_id = a.id
      where ev.m is distinct from sg.m`;
    const duplicateDecisions = await sql`
      select rollup_id, period_lo, generation from triggers group by 1, 2, 3 having count(*) <> 1`;
    const decisions = await sql<{ key: string }[]>`select idempotency_key as key from triggers`;
    const target = new Queue(TARGET.queue, { connection: producer.redis, prefix: TARGET.prefix });
    const missingAtTarget: string[] = [];
    for (const d of decisions) if (!(await target.getJob(d.key))) missingAtTarget.push(d.key);
    const dead = groups.map((g) => new Queue(g.deadLetter, { connection: producer.redis, prefix: g.prefix }));
    const deadLettered = (await Promise.all(dead.map(queueCounts))).reduce((n, c) => n + c.waiting, 0);
    // A job whose events committed but whose completion the dying master refused (ioredis: "Too
    // many Cluster redirections") is moved to the failed set: harmless, as its event is in the
    // log (retrying it is idempotent). Only a failed job whose event is missing would be a loss.
    const failedJobs = (await Promise.all(events.map((q) => q.getFailed(0, -1)))).flat();
    const failedNotLogged = failedJobs.filter((j) => !inLog.has(`${j.data.asset}\u0000${j.data.id}`));
    const [index] = await sql<{ events: number; segments: number }[]>`
      select (select count(*)::int from events) as events, (select count(*)::int from segments) as segments`;

    await Promise.all([...events, target, ...dead].map((q) => q.close()));
    await producer.close();
    const exits = await procs.stopAll(30_000);
    const errors = errorLines(procs.all);
    await sql.end({ timeout: 5 });

    const checks = {
      events_lost: lost.length,
      index_vs_range_agg_mismatched_assets: mismatched.length,
      duplicate_decisions: duplicateDecisions.length,
      decisions_missing_at_target: missingAtTarget.length,
      failed_jobs_not_in_log: failedNotLogged.length,
      dead_lettered: deadLettered,
      unclean_exits: exits.filter((e) => e.code !== 0 || e.signal).length,
      ingest_not_resumed_within_10s: resumeMs <= 10_000 ? 0 : 1,
    };
    report('cluster', {
      suite: 'test:cluster',
      ok: Object.values(checks).every((v) => v === 0),
      seed: SEED,
      offered_rate_per_s: RATE,
      seconds: { stream: streamSeconds, total: elapsed() },
      stream: {
        jobs: total,
        unique_event_ids: stream.uniqueIds,
        acknowledged_ids: producer.ackedAt.size,
        producer_retries: producer.retries,
        failed_jobs_in_log: failedJobs.length - failedNotLogged.length,
      },
      fault: {
        killed_master: victim.address,
        progress: progressAtKill,
        failover_ms: failoverMs,
        restarted_after_ms: rejoinedMs,
        group0_producer_acked_again_ms: producerResumedMs,
        group0_ingest_resumed_ms: resumeMs,
      },
      checks,
      details: {
        lost: lost.slice(0, 10),
        index,
        decisions: decisions.length,
        daemons: daemons.map((d) => d.name),
        error_log_lines: errors.length,
        error_messages: [...new Set(errors.map((e) => e.line.msg))].slice(0, 10),
      },
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, 0])));
  });
});
