import { type CommitOutcome, planAppend, planFold, touchedRanges } from '../../core/commit-plan.js';
import type { BadInputError } from '../../core/errors.js';
import type { NormalizedEvent } from '../../core/events.js';
import type { Sql, Tx } from '../pg/db.js';
import { lockAssets } from './assets.js';
import { insertEvents } from './event-append.js';
import { createCurrentPartition, createCurrentPartitionIn } from './partitions.js';
import { insertSegments, removeSegments, segmentsTouchingMany } from './segments-sql.js';

export type { CommitOutcome } from '../../core/commit-plan.js';

/**
 * Wakes the scheduler when a batch with new events commits (delivered only on commit). The payload
 * names the assets with new events, so commits that no rollup reads wake nothing; an empty payload
 * (a manual trigger, or more names than fit) wakes it for anything.
 */
export const EVENTS_CHANNEL = 'coverage_rollup_events';
/** PostgreSQL refuses notification payloads of 8000 bytes or more. */
const MAX_PAYLOAD_BYTES = 7999;

export function eventsPayload(assets: readonly string[]): string {
  const text = JSON.stringify(assets);
  return Buffer.byteLength(text, 'utf8') <= MAX_PAYLOAD_BYTES ? text : '';
}

/** Whether a notification on EVENTS_CHANNEL may concern a rollup reading `upstreams`. */
export function concernsAny(payload: string, upstreams: ReadonlySet<string>): boolean {
  let assets: unknown;
  try {
    assets = JSON.parse(payload);
  } catch {
    return true; // '' or not ours to read: wake rather than miss something
  }
  if (!Array.isArray(assets)) return true;
  return assets.some((a) => typeof a !== 'string' || upstreams.has(a));
}

/**
 * Commits a batch of normalised events in one transaction: appends them to the log (skipping
 * keys already there), then folds the new ones into each asset's merged segments in ingest order.
 *
 * Every step is one statement for the whole batch, however many assets it touches, and
 * independent statements are pipelined: begin, lock the assets, [append the events + read the
 * segments they touch], [rewrite segments + update assets + notify], commit. Under load each
 * round trip waits for a busy event loop, so their number, more than the SQL, sets the latency.
 * (A reserved connection with a hand-written BEGIN/COMMIT would save two more, but postgres.js
 * 3.4 does not recover a reserved connection whose backend died; sql.begin does.)
 */
export async function commitEvents(
  sql: Sql,
  events: readonly NormalizedEvent[],
  options: CommitOptions = {},
): Promise<CommitOutcome[]> {
  if (events.length === 0) return [];
  const at = options.ingestedAt ?? null;
  const all = options.allOrNothing ?? false;
  try {
    return await sql.begin((tx) => commitOn(tx, events, at, all));
  } catch (error) {
    if (!isNoPartition(error)) throw error;
    await createCurrentPartition(sql, at ?? undefined);
    return sql.begin((tx) => commitOn(tx, events, at, all));
  }
}

/**
 * Commits events inside the caller's transaction, through the same path as commitEvents, so they
 * commit or roll back with the caller's own writes: a run's success with its output's completion,
 * a period's rerun mark with its output's condemnation. A savepoint lets a missing
 * partition be made and the commit redone without losing the caller's work.
 */
export async function commitEventsIn(tx: Tx, events: readonly NormalizedEvent[]): Promise<CommitOutcome[]> {
  if (events.length === 0) return [];
  try {
    return await tx.savepoint((sp) => commitOn(sp, events, null, false));
  } catch (error) {
    if (!isNoPartition(error)) throw error;
    await createCurrentPartitionIn(tx);
    return commitOn(tx, events, null, false);
  }
}

export interface CommitOptions {
  /** The ingest time to record instead of the transaction's `now()`: for tests and the soak. */
  readonly ingestedAt?: Date;
  /**
   * Commit every event or none: an event the index refuses (a domain other than its asset's, set
   * by a commit that ran after the caller's check) rolls the batch back with EventsRefused instead
   * of committing the rest (a producer that answers for the whole batch, src/ingest/direct.ts).
   */
  readonly allOrNothing?: boolean;
}

/** A batch committed all or nothing held events the index refuses; nothing was written. */
export class EventsRefused extends Error {
  override readonly name = 'EventsRefused';
  constructor(readonly refused: ReadonlyArray<{ readonly index: number; readonly error: BadInputError }>) {
    super(`${refused.length} event(s) refused by the index; the batch was rolled back`);
  }
}

/**
 * "No partition of relation events found for row": the daemon makes partitions ahead, but a
 * commit must not fail for want of one (a tool committing without the daemon, a long stop).
 * A check violation without a constraint name is this one: the log's own checks all have names.
 */
function isNoPartition(error: unknown): boolean {
  const e = error as { code?: string; constraint_name?: string } | null;
  return e?.code === '23514' && !e.constraint_name;
}

/**
 * The statements of a commit, around the pure plan of src/core/commit-plan.ts: lock the assets,
 * [append the plan's rows + read the segments they touch], [rewrite segments + update assets +
 * notify].
 */
async function commitOn(
  tx: Tx,
  events: readonly NormalizedEvent[],
  at: Date | null,
  allOrNothing: boolean,
): Promise<CommitOutcome[]> {
  const assets = await lockAssets(
    tx,
    uniqueBy(events, (e) => e.asset).map((e) => ({ name: e.asset, domain: e.domain, zone: e.zone })),
  );
  const plan = planAppend(events, assets);
  // Thrown before any write: the caller's transaction rolls back the assets it registered.
  if (allOrNothing && plan.refused.length > 0) throw new EventsRefused(plan.refused);

  // Pipelined: segments are read for every candidate, new or duplicate, a superset of what the
  // new events touch that applyChanges leaves as it is. The read runs after the locks, so it
  // sees every committed change to these assets.
  const [inserted, existing] = await Promise.all([
    insertEvents(tx, plan.assets, at),
    segmentsTouchingMany(
      tx,
      plan.assets.map((p) => ({ assetId: p.asset.id, ranges: touchedRanges(p) })),
    ),
  ]);
  const { outcomes, removeIds, insert, updates } = planFold(events, plan, inserted, existing);

  // Pipelined: nothing below depends on what another statement returns. Sent at once, executed in
  // order; a failure rejects Promise.all and sql.begin rolls back.
  const writes: Array<Promise<unknown>> = [removeSegments(tx, removeIds), insertSegments(tx, insert)];
  if (updates.length > 0) {
    writes.push(
      tx`
        update assets a set
          last_seq = u.last_seq,
          event_count = a.event_count + u.n,
          segment_count = a.segment_count + u.delta,
          covered_lo = least(a.covered_lo, u.lo),
          covered_hi = greatest(a.covered_hi, u.hi),
          updated_at = now()
        from unnest(
          ${updates.map((u) => u.id)}::int8[], ${updates.map((u) => u.lastSeq)}::int8[],
          ${updates.map((u) => u.count)}::int8[], ${updates.map((u) => u.delta)}::int8[],
          ${updates.map((u) => u.lo)}::int8[], ${updates.map((u) => u.hi)}::int8[]
        ) as u(id, last_seq, n, delta, lo, hi)
        where a.id = u.id`.execute(),
    );
  }
  if (updates.length > 0) {
    writes.push(
      tx`select pg_notify(${EVENTS_CHANNEL}, ${eventsPayload(updates.map((u) => u.name))})`.execute(),
    );
  }
  await Promise.all(writes);
  return outcomes;
}

function uniqueBy<T>(items: readonly T[], key: (item: T) => string): T[] {
  const seen = new Map<string, T>();
  for (const item of items) if (!seen.has(key(item))) seen.set(key(item), item);
  return [...seen.values()];
}
