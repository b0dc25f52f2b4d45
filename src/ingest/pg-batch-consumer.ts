/**
 * The events queue consumer on BullMQ's PostgreSQL backend. BullMQ's Worker spends one
 * transaction (and its round trips) per job there: about 2,000 jobs/s with no work at all on two
 * cores, below what the index commits. This consumer claims a batch of jobs in one statement,
 * hands them to the same handler as on Redis, and completes what settled since the last
 * statement in one more (pg-jobs.ts): one claim and one completion transaction per batch.
 *
 * What BullMQ's Worker also does is done here too: lock renewal for jobs in hand, the stalled-job
 * check, wake-ups on the backend's `bullmq_jobs` notifications (with a poll bound, as a missed
 * notification must not hold a job), failures through BullMQ's own Job (attempts and backoff as
 * the producer set them), and deferred failures of jobs stalled too often.
 */
import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Sql } from '../store/pg/db.js';
import { backoffMs, retryTransient } from '../store/pg/transient.js';
import {
  type ClaimedJob,
  type Completion,
  claimJobs,
  completeJobs,
  extendLocks,
  giveBackJobs,
  type JobQueue,
  listenForJobs,
  reclaimStalled,
} from '../store/queue/jobs.js';
import { Alarm } from '../support/alarm.js';
import type { ConsumerSettings, EventConsumer } from './bullmq-consumer.js';

export interface PgConsumerSettings extends ConsumerSettings {
  /** The consumer's own pool (it ends it on close) and the queue's schema. */
  readonly sql: Sql;
  readonly schema: string;
  /** A BullMQ handle on the same queue, for the rare failed job. */
  readonly queue: Queue;
}

/** BullMQ's defaults: a job's lock, and how often stalled jobs are looked for. */
const LOCK_MS = 30_000;
const STALLED_EVERY_MS = 30_000;
const RENEW_AFTER_MS = LOCK_MS / 3;
/** A notification missed (a reconnect of the listening connection) delays a job at most this. */
const POLL_BOUND_MS = 1_000;
/** Claims per statement: at most this, and at least enough to catch up after an idle spell. */
const CLAIM_MAX = 250;
const CLAIM_MIN = 8;
/** How long close waits for the jobs in hand to settle; the rest return when their locks lapse. */
const CLOSE_WAIT_MS = 10_000;
/** Completion statements retried on a transient error before the jobs are left to their locks. */
const SETTLE_ATTEMPTS = 5;
const WORKER_NAME = 'coverage-rollup-ingest';

interface InHand {
  readonly job: ClaimedJob;
  renewedAt: number;
}

export function pgBatchConsumer(settings: PgConsumerSettings): EventConsumer {
  return new PgBatchConsumer(settings);
}

class PgBatchConsumer implements EventConsumer {
  private readonly q: JobQueue;
  private readonly inHand = new Map<string, InHand>();
  private done: Completion[] = [];
  private back: { id: string; token: string }[] = [];
  private readonly listeners: (() => void)[] = [];
  private paused = false;
  private closing = false;
  private claiming: Promise<unknown> = Promise.resolve();
  private flushing: Promise<void> | undefined;
  private lastClaimed = CLAIM_MAX;
  private readonly tokenBase = randomUUID();
  private claims = 0;
  /** Wakes the claim loop; a wake-up while it works makes its next sleep return at once. */
  private readonly alarm = new Alarm(true);
  /** The claim loop sleeps because every slot is taken: a settled job wakes it. */
  private full = false;
  private readonly timers: NodeJS.Timeout[];
  private readonly listening: Promise<{ unlisten: () => Promise<void> } | undefined>;
  private readonly loop: Promise<void>;

  constructor(private readonly s: PgConsumerSettings) {
    this.q = { sql: s.sql, schema: s.schema, name: s.name };
    this.listening = listenForJobs(s.sql, (queue) => {
      if (queue === s.name) this.alarm.wake();
    }).catch((error: unknown) => {
      s.log.warn({ err: error, queue: s.name }, 'could not listen for new jobs; polling every second');
      return undefined;
    });
    this.timers = [
      setInterval(() => void this.renewLocks(), RENEW_AFTER_MS).unref(),
      setInterval(() => void this.checkStalled(), STALLED_EVERY_MS).unref(),
    ];
    this.loop = this.run();
  }

  async pause(): Promise<void> {
    this.paused = true;
    await this.claiming;
  }

  resume(): void {
    this.paused = false;
    this.alarm.wake();
  }

  isPaused(): boolean {
    return this.paused;
  }

  onCompleted(listener: () => void): void {
    this.listeners.push(listener);
  }

  async close(force: boolean): Promise<void> {
    this.closing = true;
    this.alarm.wake();
    for (const t of this.timers) clearInterval(t);
    await this.loop;
    const deadline = Date.now() + CLOSE_WAIT_MS;
    while (!force && (this.inHand.size > 0 || this.flushing) && Date.now() < deadline)
      await (this.flushing ?? this.alarm.sleep(50));
    if (this.inHand.size > 0)
      this.s.log.warn(
        { queue: this.s.name, jobs: this.inHand.size },
        'closing with jobs in hand; they return to the queue when their locks lapse',
      );
    await (await this.listening)?.unlisten().catch(() => {});
    await this.s.sql.end({ timeout: 5 });
  }

  private async run(): Promise<void> {
    // BullMQ creates (or migrates) the queue's schema when its handle first connects.
    for (let failures = 0; !this.closing; failures++) {
      try {
        await this.s.queue.waitUntilReady();
        break;
      } catch (error) {
        this.s.log.error({ err: error, queue: this.s.name }, 'events worker error');
        await this.alarm.sleep(backoffMs(failures));
      }
    }
    for (let failures = 0; !this.closing; ) {
      const free = this.s.concurrency - this.inHand.size;
      if (this.paused || free <= 0) {
        this.full = free <= 0;
        await this.alarm.sleep(POLL_BOUND_MS);
        this.full = false;
        continue;
      }
      const count = Math.min(free, CLAIM_MAX, Math.max(CLAIM_MIN, 2 * this.lastClaimed));
      const claim = claimJobs(this.q, count, `${this.tokenBase}:${++this.claims}`, LOCK_MS, WORKER_NAME);
      this.claiming = claim.catch(() => {});
      let jobs: ClaimedJob[];
      try {
        jobs = await claim;
        failures = 0;
      } catch (error) {
        this.s.log.error({ err: error, queue: this.s.name }, 'events worker error');
        await this.alarm.sleep(backoffMs(failures++));
        continue;
      }
      this.lastClaimed = jobs.length;
      for (const job of jobs) this.take(job);
      if (jobs.length < count) await this.alarm.sleep(POLL_BOUND_MS);
    }
  }

  private take(job: ClaimedJob): void {
    this.inHand.set(job.id, { job, renewedAt: Date.now() });
    const work = job.deferredFailure
      ? Promise.reject(new Error(job.deferredFailure))
      : this.s.handle({ id: job.id, name: job.name, data: job.data, queueName: this.s.name });
    void work.then(
      (outcome) => {
        if (outcome.kind === 'done')
          this.done.push({ id: job.id, token: job.token, value: JSON.stringify(outcome.result) });
        else this.back.push({ id: job.id, token: job.token });
        this.flush();
      },
      (error: unknown) => void this.fail(job, error),
    );
  }

  /** Through BullMQ's own Job: it retries or fails as the job's attempts and backoff say. */
  private async fail(job: ClaimedJob, error: unknown): Promise<void> {
    this.s.log.error({ job_id: job.id, queue: this.s.name, err: error }, 'event job failed');
    try {
      const found = await this.s.queue.getJob(job.id);
      await found?.moveToFailed(error instanceof Error ? error : new Error(String(error)), job.token, false);
    } catch (moveError) {
      this.s.log.warn(
        { job_id: job.id, err: moveError },
        'could not fail a job; it returns when its lock lapses',
      );
    }
    this.release([job.id]);
  }

  /** Settles what the handler finished, one statement per kind, while more keeps coming. */
  private flush(): void {
    this.flushing ??= (async () => {
      while (this.done.length > 0 || this.back.length > 0) {
        const done = this.done.splice(0);
        const back = this.back.splice(0);
        try {
          if (done.length > 0) await this.settle(() => this.complete(done));
          if (back.length > 0) {
            await this.settle(() => giveBackJobs(this.q, back));
            this.s.metrics.jobsReturned.inc(back.length);
          }
        } catch (error) {
          this.s.log.warn(
            { err: error, queue: this.s.name, jobs: done.length + back.length },
            'could not settle jobs; they return to the queue when their locks lapse',
          );
        }
        this.release([...done, ...back].map((j) => j.id));
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.done.length > 0 || this.back.length > 0) this.flush();
    });
  }

  private async settle(statement: () => Promise<void>): Promise<void> {
    await retryTransient(statement, {
      attempts: SETTLE_ATTEMPTS,
      sleep: (ms) => this.alarm.sleep(ms),
      stopped: () => this.closing,
    });
  }

  private async complete(jobs: Completion[]): Promise<void> {
    const completed = await completeJobs(this.q, jobs);
    if (completed.size < jobs.length)
      this.s.log.warn(
        { queue: this.s.name, jobs: jobs.length - completed.size },
        'jobs lost their lock before completing; their events are committed, so a redelivery is a duplicate',
      );
    for (let i = 0; i < completed.size; i++) for (const listener of this.listeners) listener();
  }

  private release(ids: readonly string[]): void {
    for (const id of ids) this.inHand.delete(id);
    if (this.full) this.alarm.wake();
  }

  private async renewLocks(): Promise<void> {
    const now = Date.now();
    const due = [...this.inHand.values()].filter((h) => now - h.renewedAt >= RENEW_AFTER_MS);
    if (due.length === 0) return;
    try {
      const lost = await extendLocks(
        this.q,
        due.map((h) => h.job),
        LOCK_MS,
      );
      for (const h of due) h.renewedAt = now;
      if (lost.length > 0)
        this.s.log.warn({ queue: this.s.name, jobs: lost.length }, 'jobs in hand lost their locks');
    } catch (error) {
      this.s.log.warn({ err: error, queue: this.s.name }, 'could not renew job locks');
    }
  }

  private async checkStalled(): Promise<void> {
    try {
      const ids = await reclaimStalled(this.q, this.s.maxStalledCount, STALLED_EVERY_MS);
      if (ids.length > 0)
        this.s.log.warn({ queue: this.s.name, jobs: ids.length }, 'stalled jobs returned to the queue');
    } catch (error) {
      this.s.log.warn({ err: error, queue: this.s.name }, 'could not check for stalled jobs');
    }
  }
}
