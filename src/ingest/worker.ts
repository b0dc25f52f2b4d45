import type { Config } from '../config/index.js';
import type { RollupRuntime } from '../config/rollups.js';
import type { NormalizedEvent } from '../core/events/events.js';
import type { Metrics } from '../metrics/registry.js';
import { queueConnection } from '../queue/backend.js';
import { consumedGroups, type QueueGroup } from '../queue/groups.js';
import { queueSchema } from '../queue/schema.js';
import { type CommitOutcome, commitEvents } from '../store/assets/commit.js';
import { connect, type Sql } from '../store/pg/db.js';
import { isTransient } from '../store/pg/transient.js';
import type { Logger } from '../support/log.js';
import { bullmqConsumer, type ConsumerSettings, type EventConsumer } from './bullmq-consumer.js';
import { eventJobHandler } from './event-job.js';
import { startReconciling } from './failed-reconcile.js';
import { GroupCommitter } from './group-commit.js';
import type { Hold } from './hold.js';
import { pgBatchConsumer } from './pg-batch-consumer.js';
import { probePostgres, StallGuard } from './pg-stall.js';
import { normalizeOptions } from './precheck.js';

export type { IngestResult } from './event-job.js';

export interface IngestWorker {
  /** Calls back once per events job completed, in any consumed group. */
  onCompleted(listener: () => void): void;
  /** True while every group's consumer takes no jobs (ingest paused for PostgreSQL). */
  isPaused(): boolean;
  /** Stops taking jobs, lets in-flight commits finish (bounded), then closes connections. */
  close(timeoutMs: number): Promise<void>;
}

/** Transactions in flight at once per worker, on disjoint sets of assets. */
const COMMIT_LANES = 2;

/** A stable lane for an asset name (FNV-1a). */
export function laneOf(asset: string, lanes: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < asset.length; i++) h = Math.imul(h ^ asset.charCodeAt(i), 0x01000193);
  return (h >>> 0) % lanes;
}

/**
 * The ingest worker's own pool. A transaction its client stops talking to (a partition, a paused
 * process) is ended by the server after queue.pg_stall_timeout, so the asset rows it locked are
 * free for the instances that take its jobs over.
 */
export function connectIngest(config: Config, log?: Logger): Sql {
  return connect(config.database_url, {
    max: 2 * COMMIT_LANES,
    applicationName: 'coverage-rollup-ingest',
    idleInTransactionTimeoutMs: config.queue.pg_stall_timeout,
    // A commit stuck on a stale flow is given up and retried on a fresh connection.
    ...(log ? { staleAfterMs: config.queue.pg_stall_timeout, log } : {}),
  });
}

/**
 * The events queue consumer: one consumer per consumed group (a BullMQ Worker on Redis, a batch
 * consumer on PostgreSQL: pg-batch-consumer.ts), sharing the commit lanes (an asset's events all
 * travel through one group, so lanes see them in their queue's order).
 * Bad input is dead-lettered in its group and the job completes (never retried);
 * good events join a group commit and their job completes only once the event is committed.
 * An instance cut off from PostgreSQL pauses and gives its jobs back (see StallGuard); a job given
 * back returns to the head of the queue without counting as an attempt.
 */
export function startIngestWorker(
  config: Config,
  sql: Sql,
  log: Logger,
  metrics: Metrics,
  /** The rollups now, whose bound on the periods one event touches the handler applies. */
  rollups?: () => readonly RollupRuntime[],
): IngestWorker {
  const { queue } = config;
  // The failed-set reconciliation only identifies a job's event: one committed before a rollup
  // changed is still recognised as committed.
  const options = normalizeOptions(config);
  const connection = queueConnection(config, { log });
  // Commit lanes: each asset always goes to the same lane, and each lane runs one transaction at
  // a time. Lanes never wait on each other's asset locks, so their commits overlap; within a lane
  // an asset's events commit in the order this worker took them.
  const lanes = Array.from({ length: COMMIT_LANES }, () => newCommitter());
  const committer = {
    add: (event: NormalizedEvent, hold: Hold): Promise<CommitOutcome> =>
      lanes[laneOf(event.asset, lanes.length)]!.add(event, hold),
    oldestCommitMs: () => Math.max(...lanes.map((l) => l.oldestCommitMs())),
    drain: () => Promise.all(lanes.map((l) => l.drain())),
    abandon: () => {
      for (const l of lanes) l.abandon();
    },
  };
  function newCommitter() {
    return new GroupCommitter<NormalizedEvent, CommitOutcome>({
      commit: (events) => commitEvents(sql, events),
      isTransient,
      maxBatch: queue.batch_size,
      maxWaitMs: queue.batch_wait,
      maxInFlight: 1,
      onCommit: (size, seconds) => {
        metrics.batchSize.observe(size);
        metrics.commitSeconds.observe(seconds);
      },
      onRetry: (error, attempt, size) => {
        metrics.commitRetries.inc();
        log.warn({ err: error, attempt, size }, 'group commit failed transiently; retrying');
      },
    });
  }

  /** Jobs whose commit this worker awaits; releasing one gives its job back. */
  const held = new Set<Hold>();
  const deps = {
    normalize: normalizeOptions(config, rollups),
    commit: committer.add,
    paused: () => guard.paused,
    held,
    log,
    metrics,
  };

  const consume = (group: QueueGroup) => {
    const dlq = connection.queue(group.deadLetter, group.prefix);
    // The same connection's errors reach the consumer's handler; here only so none goes unhandled.
    dlq.on('error', (error) => log.debug({ err: error }, 'dead-letter queue connection error'));
    // Its own handle on the queue: the failed-set reconciliation, and failures on PostgreSQL.
    const jobs = connection.queue(group.name, group.prefix);
    jobs.on('error', (error) => log.debug({ err: error }, 'events queue connection error'));
    const settings: ConsumerSettings = {
      name: group.name,
      prefix: group.prefix,
      concurrency: queue.concurrency,
      maxStalledCount: queue.max_stalled_count,
      handle: eventJobHandler(deps, dlq),
      log,
      metrics,
    };
    const consumer: EventConsumer =
      connection.backend === 'postgres'
        ? pgBatchConsumer({
            ...settings,
            // Claims and completions need not wait for the WAL flush: one lost to a server crash
            // returns its job to the queue, and a redelivered event is a duplicate.
            sql: connect(config.database_url, {
              max: 3,
              applicationName: 'coverage-rollup-queue',
              asyncCommit: true,
              staleAfterMs: queue.pg_stall_timeout,
              log,
            }),
            schema: queueSchema(group.prefix),
            queue: jobs,
          })
        : bullmqConsumer(connection, settings);
    return { consumer, dlq, jobs };
  };
  const consumers = consumedGroups(queue).map(consume);
  const workers = consumers.map((c) => c.consumer);

  const guard = new StallGuard({
    boundMs: queue.pg_stall_timeout,
    oldestCommitMs: committer.oldestCommitMs,
    probe: (timeoutMs) => probePostgres(config.database_url, timeoutMs),
    pause: async () => {
      metrics.ingestPausedForPostgres.set(1);
      await Promise.all(workers.map((w) => w.pause()));
      const returning = [...held];
      for (const hold of returning) hold.release(new Error('PostgreSQL does not answer'));
      return returning.length;
    },
    resume: async () => {
      await Promise.all(workers.map((w) => w.resume()));
      metrics.ingestPausedForPostgres.set(0);
    },
    log,
  });
  guard.start();
  const reconcileQueues = consumers.map((c) => c.jobs);
  const stopReconciling = startReconciling(reconcileQueues, sql, options, queue.reconcile_every, log);

  return {
    onCompleted: (listener) => {
      for (const w of workers) w.onCompleted(listener);
    },
    isPaused: () => workers.every((w) => w.isPaused()),
    async close(timeoutMs) {
      await guard.stop();
      await stopReconciling();
      const drained = (async () => {
        await Promise.all(workers.map((w) => w.pause()));
        await committer.drain();
      })();
      const timedOut = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>((r) => setTimeout(() => r(true), timeoutMs).unref()),
      ]);
      if (timedOut) {
        committer.abandon();
        log.warn(
          'in-flight events did not commit in time; their jobs return to the queue when their locks lapse',
        );
      }
      // Force when Redis is unreachable: a graceful close sends QUIT, which waits for a connection
      // that may never come back. The commits have drained (or been abandoned) either way.
      await Promise.all(workers.map((w) => w.close(timedOut || !connection.reachable)));
      await Promise.all(consumers.flatMap((c) => [c.dlq.close(), c.jobs.close()]));
      await connection.close();
    },
  };
}
