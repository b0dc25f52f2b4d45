/**
 * What the events queue's consumer does with one job, on either queue backend: normalize its
 * event, commit it through the group committer, or dead-letter bad input. The consumers differ
 * only in how they take jobs and settle them (bullmq-consumer.ts, pg-batch-consumer.ts).
 */
import type { Queue } from 'bullmq';
import { BadInputError } from '../core/errors.js';
import { type NormalizedEvent, type NormalizeOptions, normalizeEvent } from '../core/events/events.js';
import type { Metrics } from '../metrics/registry.js';
import { deadLetter } from '../queue/dead-letter.js';
import type { CommitOutcome } from '../store/assets/commit.js';
import type { Logger } from '../support/log.js';
import { Hold } from './hold.js';

export type IngestResult =
  | { status: 'committed'; asset: string; seq: number }
  | { status: 'duplicate'; asset: string }
  | { status: 'dead_lettered'; reason: string };

/** The parts of a queue job the handler reads. */
export interface EventJob {
  readonly id?: string | undefined;
  readonly name: string;
  readonly data: unknown;
  readonly queueName: string;
}

/** Done: complete the job with this result. Give back: return it to the queue uncounted. */
export type JobOutcome =
  | { readonly kind: 'done'; readonly result: IngestResult }
  | { readonly kind: 'give-back' };

export interface EventJobDeps {
  readonly normalize: NormalizeOptions;
  readonly commit: (event: NormalizedEvent, hold: Hold) => Promise<CommitOutcome>;
  /** True while ingest is paused (PostgreSQL unreachable): jobs handed over now go back. */
  readonly paused: () => boolean;
  /** Commits this instance awaits; releasing one gives its job back. */
  readonly held: Set<Hold>;
  readonly log: Logger;
  readonly metrics: Metrics;
}

/** A handler for one queue group's jobs; its dead letters go to `dlq`. */
export function eventJobHandler(deps: EventJobDeps, dlq: Queue): (job: EventJob) => Promise<JobOutcome> {
  const { log, metrics } = deps;
  const reject = async (job: EventJob, error: BadInputError): Promise<JobOutcome> => {
    await deadLetter(dlq, error, job);
    metrics.eventsRejected.inc({ reason: error.reason });
    log.warn({ job_id: job.id, reason: error.reason, message: error.message }, 'event dead-lettered');
    return { kind: 'done', result: { status: 'dead_lettered', reason: error.reason } };
  };
  return async (job) => {
    let event: NormalizedEvent;
    try {
      event = normalizeEvent(job.data, deps.normalize);
    } catch (error) {
      if (error instanceof BadInputError) return reject(job, error);
      throw error;
    }
    // A fetch already under way when ingest paused may still hand over a job.
    if (deps.paused()) return { kind: 'give-back' };
    const hold = new Hold();
    deps.held.add(hold);
    let outcome: CommitOutcome;
    try {
      outcome = await deps.commit(event, hold);
    } catch (error) {
      if (hold.released) return { kind: 'give-back' };
      throw error;
    } finally {
      deps.held.delete(hold);
    }
    if (outcome.status === 'rejected') return reject(job, outcome.error);
    metrics.eventsIngested.inc({ status: outcome.status });
    return {
      kind: 'done',
      result:
        outcome.status === 'committed'
          ? { status: 'committed', asset: event.asset, seq: outcome.seq }
          : { status: 'duplicate', asset: event.asset },
    };
  };
}
