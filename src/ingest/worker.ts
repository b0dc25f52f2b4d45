import { type Job, type KeepJobs, type Queue, WaitingError, type Worker } from 'bullmq';
import type { Config, QueueBackendKind } from '../config.js';
import { BadInputError } from '../core/errors.js';
import { type NormalizedEvent, normalizeEvent } from '../core/events.js';
import { type CommitOutcome, commitEvents } from '../index/commit.js';
import { connect, type Sql } from '../index/db.js';
import { isTransient } from '../index/transient.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { deadLetter } from './dead-letter.js';
import { startReconciling } from './failed-reconcile.js';
import { GroupCommitter } from './group-commit.js';
import { consumedGroups, type QueueGroup } from './groups.js';
import { probePostgres, StallGuard } from './pg-stall.js';
import { queueConnection } from './queue-backend.js';

export type IngestResult =
  | { status: 'committed'; asset: string; seq: number }
  | { status: 'duplicate'; asset: string }
  | { status: 'dead_lettered'; reason: string };

export interface IngestWorker {
  /** One BullMQ worker per consumed queue group. */
  readonly workers: readonly Worker[];
  /** Stops taking jobs, lets in-flight commits finish (bounded), then closes connections. */
  close(timeoutMs: number): Promise<void>;
}

/** Transactions in flight at once per worker, on disjoint sets of assets. */
const COMMIT_LANES = 2;

/**
 * Completed event jobs kept for inspection (the event log is the record of what was ingested).
 * BullMQ's PostgreSQL backend trims by count by reading every completed job of the queue at each
 * completion (20 ms a job with 1,000 kept: nine tenths of its time), so there a job is deleted as
 * it completes. Both backends take `true`; WorkerOptions types only the KeepJobs form.
 */
function keepCompleted(backend: QueueBackendKind): KeepJobs {
  return backend === 'redis' ? { count: 1000 } : (true as unknown as KeepJobs);
}

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

export function normalizeOptions(config: Config) {
  return {
    maxPayloadBytes: config.queue.max_payload_bytes,
    assets: new Map(config.assets.map((a) => [a.name, { domain: a.domain, zone: a.zone }])),
  };
}

/**
 * The events queue consumer: one BullMQ worker per consumed group, sharing the commit lanes (an
 * asset's events all travel through one group, so lanes see them in their queue's order).
 * Bad input is dead-lettered in its group and the job completes (never retried);
 * good events join a group commit and their job completes only once the event is committed.
 * An instance cut off from PostgreSQL pauses and gives its jobs back (see StallGuard); a job given
 * back returns to the head of the queue without counting as an attempt.
 */
export function startIngestWorker(config: Config, sql: Sql, log: Logger, metrics: Metrics): IngestWorker {
  const { queue } = config;
  const options = normalizeOptions(config);
  const connection = queueConnection(config);
  // Commit lanes: each asset always goes to the same lane, and each lane runs one transaction at
  // a time. Lanes never wait on each other's asset locks, so their commits overlap; within a lane
  // an asset's events commit in the order this worker took them.
  const lanes = Array.from({ length: COMMIT_LANES }, () => newCommitter());
  const committer = {
    add: (event: NormalizedEvent, signal: AbortSignal) =>
      lanes[laneOf(event.asset, lanes.length)]!.add(event, signal),
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

  const reject = async (dlq: Queue, job: Job, error: BadInputError): Promise<IngestResult> => {
    await deadLetter(dlq, error, job);
    metrics.eventsRejected.inc({ reason: error.reason });
    log.warn({ job_id: job.id, reason: error.reason, message: error.message }, 'event dead-lettered');
    return { status: 'dead_lettered', reason: error.reason };
  };

  /** Jobs whose commit this worker awaits; aborting one gives its job back. */
  const held = new Set<AbortController>();
  const giveBack = async (job: Job, token: string | undefined): Promise<never> => {
    try {
      // Back to the head of the queue, lock released, attemptsMade unchanged.
      await job.moveToWait(token);
      metrics.jobsReturned.inc();
    } catch (error) {
      log.warn({ job_id: job.id, err: error }, 'could not give a job back; it returns when its lock lapses');
    }
    throw new WaitingError(); // tells BullMQ the job left active on purpose: neither completed nor failed
  };

  const consume = (group: QueueGroup) => {
    const dlq = connection.queue(group.deadLetter, group.prefix);
    // The same connection's errors reach the worker's handler below; here only so none goes unhandled.
    dlq.on('error', (error) => log.debug({ err: error }, 'dead-letter queue connection error'));
    const worker = connection.worker<unknown, IngestResult>(
      group.name,
      group.prefix,
      async (job, token) => {
        let event: NormalizedEvent;
        try {
          event = normalizeEvent(job.data, options);
        } catch (error) {
          if (error instanceof BadInputError) return reject(dlq, job, error);
          throw error;
        }
        // A fetch already under way when ingest paused may still hand over a job.
        if (guard.paused) return giveBack(job, token);
        const hold = new AbortController();
        held.add(hold);
        let outcome: CommitOutcome;
        try {
          outcome = await committer.add(event, hold.signal);
        } catch (error) {
          if (hold.signal.aborted) return giveBack(job, token);
          throw error;
        } finally {
          held.delete(hold);
        }
        if (outcome.status === 'rejected') return reject(dlq, job, outcome.error);
        metrics.eventsIngested.inc({ status: outcome.status });
        return outcome.status === 'committed'
          ? { status: 'committed', asset: event.asset, seq: outcome.seq }
          : { status: 'duplicate', asset: event.asset };
      },
      {
        concurrency: queue.concurrency,
        maxStalledCount: queue.max_stalled_count,
        removeOnComplete: keepCompleted(connection.backend),
        removeOnFail: { count: 10_000 },
      },
    );
    worker.on('error', (error) => log.error({ err: error, group: group.index }, 'events worker error'));
    worker.on('failed', (job, error) =>
      log.error({ job_id: job?.id, group: group.index, err: error }, 'event job failed'),
    );
    // Its own handle on the queue, for the failed-set reconciliation.
    const reconcile = connection.queue(group.name, group.prefix);
    reconcile.on('error', (error) => log.debug({ err: error }, 'events queue connection error'));
    return { worker, dlq, reconcile };
  };
  const consumers = consumedGroups(queue).map(consume);
  const workers = consumers.map((c) => c.worker);

  const guard = new StallGuard({
    boundMs: queue.pg_stall_timeout,
    oldestCommitMs: committer.oldestCommitMs,
    probe: (timeoutMs) => probePostgres(config.database_url, timeoutMs),
    pause: async () => {
      metrics.ingestPausedForPostgres.set(1);
      await Promise.all(workers.map((w) => w.pause(true)));
      const returning = [...held];
      for (const hold of returning) hold.abort(new Error('PostgreSQL does not answer'));
      return returning.length;
    },
    resume: async () => {
      await Promise.all(workers.map((w) => w.resume()));
      metrics.ingestPausedForPostgres.set(0);
    },
    log,
  });
  guard.start();
  const reconcileQueues = consumers.map((c) => c.reconcile);
  const stopReconciling = startReconciling(reconcileQueues, sql, options, queue.reconcile_every, log);

  return {
    workers,
    async close(timeoutMs) {
      await guard.stop();
      await stopReconciling();
      const drained = (async () => {
        await Promise.all(workers.map((w) => w.pause(true)));
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
      await Promise.all(consumers.flatMap((c) => [c.dlq.close(), c.reconcile.close()]));
      await connection.close();
    },
  };
}
