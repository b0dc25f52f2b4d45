/**
 * The producer path without the queue (issue 38). Where the queue and the index share one
 * PostgreSQL (`queue.backend: postgres`, the embedded default), a queue job is one more write, a
 * claim and a completion in the same database before its event reaches the same commit. So
 * `POST /v1/events` and `emit` commit a batch straight into the index there and answer after it
 * commits: the next coverage answer includes it (read-your-writes). Concurrent requests share
 * transactions (directCommitter): one commit, one WAL flush, for the events of every request that
 * arrived meanwhile, each request answered once its own events are committed, or with the error
 * that failed them.
 *
 * Nothing here is a second ingest: the items are checked by the worker's own checks
 * (precheck.ts: the normaliser and the recorded domains) and committed by the worker's own commit
 * (store/assets/commit.ts), which appends to the event log under the assets' row locks, folds the events
 * into the segments, advances each asset's `last_seq` and notifies the scheduler. The scheduler
 * follows the log by `seq` from its cursors, so it learns of these events exactly as of
 * queue-committed ones, and retention drops nothing its cursors have not passed.
 */
import type { NormalizedEvent } from '../core/events/events.js';
import { type CommitOutcome, commitEvents, EventsRefused } from '../store/assets/commit.js';
import type { Sql } from '../store/pg/db.js';
import { isTransient, retryTransient } from '../store/pg/transient.js';
import type { IngestResult } from './event-job.js';
import { GroupCommitter } from './group-commit.js';
import type { Refusal } from './precheck.js';

export type DirectOutcome =
  /** Committed: one result per item, in item order, as the queue job would have completed with. */
  | { readonly kind: 'committed'; readonly results: IngestResult[] }
  /** Nothing committed: why, per refused item, in item order. */
  | { readonly kind: 'refused'; readonly refusals: readonly Refusal[] };

/**
 * Attempts at a commit that failed transiently (a lost connection, a deadlock, a server restart).
 * A retry is safe: events are keyed, so one whose first commit did land is a duplicate the second
 * time. The caller gets the last error after these, and its producer retries as it would for a
 * queue that did not answer.
 */
const ATTEMPTS = 4;

/**
 * Commits events checkEvents passed, all or none, in one transaction (retried while it fails
 * transiently). The index refuses only what a concurrent commit made wrong since the check.
 */
export async function commitChecked(sql: Sql, events: readonly NormalizedEvent[]): Promise<DirectOutcome> {
  let outcomes: CommitOutcome[];
  try {
    outcomes = await retryTransient(() => commitEvents(sql, events, { allOrNothing: true }), {
      attempts: ATTEMPTS,
    });
  } catch (error) {
    if (error instanceof EventsRefused) return { kind: 'refused', refusals: error.refused };
    throw error;
  }
  return committed(events, outcomes);
}

function committed(events: readonly NormalizedEvent[], outcomes: readonly CommitOutcome[]): DirectOutcome {
  return {
    kind: 'committed',
    results: outcomes.map((o, i): IngestResult => {
      const asset = events[i]!.asset;
      // allOrNothing: a rejected outcome throws, so only these two remain.
      return o.status === 'committed'
        ? { status: 'committed', asset, seq: o.seq }
        : { status: 'duplicate', asset };
    }),
  };
}

/**
 * Requests, each with the events checkEvents passed, committed together: a request added while
 * no commit is under way is flushed once the requests already read from the network have added
 * theirs (no wait of its own), and those arriving during a commit go together in the next one.
 * Each request is all or nothing as alone: one the index refuses leaves the transaction (answered
 * with its refusals) and the others are committed without it. A transient failure is retried
 * (ATTEMPTS in all) and then answered to every request of the batch; any other failure splits the
 * batch until it fails the requests it belongs to alone. A key sent by two requests of one commit
 * is a duplicate the second time, as in two commits.
 */
export function directCommitter(sql: Sql): GroupCommitter<readonly NormalizedEvent[], DirectOutcome> {
  return new GroupCommitter({
    commit: (requests) => commitRequests(sql, requests),
    isTransient,
    maxBatch: REQUESTS_PER_COMMIT,
    maxWaitMs: 0,
    // Commits of one asset wait for each other's row lock: a second transaction in flight would
    // mostly wait, while the requests arriving meanwhile are better off in the next batch.
    maxInFlight: 1,
    attempts: ATTEMPTS,
  });
}

/** Requests in one transaction at most; a batch of large requests is large enough. */
const REQUESTS_PER_COMMIT = 256;

/** One transaction for every request, less those the index refuses (then retried without them). */
async function commitRequests(
  sql: Sql,
  requests: ReadonlyArray<readonly NormalizedEvent[]>,
): Promise<DirectOutcome[]> {
  const answers: Array<DirectOutcome | undefined> = requests.map(() => undefined);
  let live = requests.map((_, i) => i);
  while (live.length > 0) {
    const events = live.flatMap((i) => requests[i]!);
    try {
      const outcomes = await commitEvents(sql, events, { allOrNothing: true });
      let at = 0;
      for (const i of live) {
        const own = requests[i]!;
        answers[i] = committed(own, outcomes.slice(at, at + own.length));
        at += own.length;
      }
      break;
    } catch (error) {
      if (!(error instanceof EventsRefused)) throw error;
      const refusals = new Map<number, Refusal[]>();
      for (const { index, error: why } of error.refused) {
        let at = 0;
        for (const i of live) {
          const n = requests[i]!.length;
          if (index < at + n) {
            refusals.set(i, [...(refusals.get(i) ?? []), { index: index - at, error: why }]);
            break;
          }
          at += n;
        }
      }
      for (const [i, refused] of refusals) answers[i] = { kind: 'refused', refusals: refused };
      live = live.filter((i) => !refusals.has(i));
    }
  }
  return answers as DirectOutcome[];
}

/** Whether `POST /v1/events` and `emit` commit without the queue: its store is the index's database. */
export function commitsDirectly(config: { readonly queue: { readonly backend: string } }): boolean {
  return config.queue.backend === 'postgres';
}
