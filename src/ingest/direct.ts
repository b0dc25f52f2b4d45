/**
 * The producer path without the queue (issue 38). Where the queue and the index share one
 * PostgreSQL (`queue.backend: postgres`, the embedded default), a queue job is one more write, a
 * claim and a completion in the same database before its event reaches the same commit. So
 * `POST /v1/events` and `emit` commit a batch straight into the index there, in one transaction of
 * their own, and answer after it commits: the next coverage answer includes it (read-your-writes).
 *
 * Nothing here is a second ingest: the items are checked by the worker's own checks
 * (precheck.ts: the normaliser and the recorded domains) and committed by the worker's own commit
 * (store/assets/commit.ts), which appends to the event log under the assets' row locks, folds the events
 * into the segments, advances each asset's `last_seq` and notifies the scheduler. The scheduler
 * follows the log by `seq` from its cursors, so it learns of these events exactly as of
 * queue-committed ones, and retention drops nothing its cursors have not passed.
 */
import type { NormalizedEvent, NormalizeOptions } from '../core/events/events.js';
import { domainsOf } from '../store/assets/assets.js';
import { type CommitOutcome, commitEvents, EventsRefused } from '../store/assets/commit.js';
import type { Sql } from '../store/pg/db.js';
import { retryTransient } from '../store/pg/transient.js';
import type { IngestResult } from './event-job.js';
import { checkEvents, type Refusal } from './precheck.js';

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
 * Checks `items` and commits them all in one transaction, or none: any refused item (by the
 * checks, or by the index itself when a concurrent commit set an asset's domain first) refuses
 * the batch. Resolves after the commit.
 */
export async function commitDirectly(
  sql: Sql,
  items: readonly unknown[],
  options: NormalizeOptions,
): Promise<DirectOutcome> {
  const { events, refusals } = await checkEvents(items, options, (names) => domainsOf(sql, names));
  if (refusals.length > 0) return { kind: 'refused', refusals };
  return commitChecked(sql, events);
}

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
  return {
    kind: 'committed',
    results: outcomes.map((o, i): IngestResult => {
      const asset = events[i]!.asset;
      // allOrNothing: a rejected outcome throws above, so only these two remain.
      return o.status === 'committed'
        ? { status: 'committed', asset, seq: o.seq }
        : { status: 'duplicate', asset };
    }),
  };
}

/** Whether `POST /v1/events` and `emit` commit without the queue: its store is the index's database. */
export function commitsDirectly(config: { readonly queue: { readonly backend: string } }): boolean {
  return config.queue.backend === 'postgres';
}
