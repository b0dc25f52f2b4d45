/**
 * What committing a batch of events does to the index, decided around the one statement that
 * appends them to the log (src/store/assets/commit.ts runs the statements and only loads and
 * stores). Before the append, `planAppend`: which events each asset refuses (another domain),
 * which are repeats of a key earlier in the batch, and the seq each remaining key gets if its log
 * lacks it. After it, told which keys the log took (a key it already held is a duplicate),
 * `planFold`: every event's outcome, the changes folded into the merged segments in ingest order,
 * and each asset's counters. Pure; property-tested against a per-event model
 * (test/unit/core/events/commit-plan.test.ts).
 */
import type { BadInputError } from '../errors.js';
import { applyChanges } from '../intervals/segments.js';
import type { Change, Domain, Interval, Segment } from '../types.js';
import { domainMismatch, type NormalizedEvent } from './events.js';

/** Per event, in input order: accepted now, seen before (same key), or refused by the index. */
export type CommitOutcome =
  | { readonly status: 'committed'; readonly assetId: number; readonly seq: number }
  | { readonly status: 'duplicate'; readonly assetId: number }
  | { readonly status: 'rejected'; readonly error: BadInputError };

/** What the plan reads of an asset's row, locked for the batch (store/assets/assets.ts `AssetRow`). */
export interface LockedAsset {
  readonly id: number;
  readonly name: string;
  readonly domain: Domain;
  /** The newest seq its log has given; the batch's new events follow it. */
  readonly last_seq: number;
}

/** One asset's share of a batch. */
export interface AssetAppend<A extends LockedAsset> {
  readonly asset: A;
  /** Its events, as indexes into the batch, in batch order. */
  readonly indexes: readonly number[];
  /**
   * The first event of each key in the batch, in batch order, with the seq it gets if its key is
   * new to the log: the asset's last seq plus its place among these rows. A key the log already
   * holds leaves its seq unused.
   */
  readonly rows: ReadonlyArray<{
    readonly index: number;
    readonly event: NormalizedEvent;
    readonly seq: number;
  }>;
}

export interface AppendPlan<A extends LockedAsset> {
  /** Events whose bounds are not of their asset's domain, in batch order: they are not appended. */
  readonly refused: ReadonlyArray<{ readonly index: number; readonly error: BadInputError }>;
  /** Per asset with events to append, in the order the batch first names them. */
  readonly assets: ReadonlyArray<AssetAppend<A>>;
}

/** The rows to append for a batch whose assets are locked as `assets` (every event's asset is there). */
export function planAppend<A extends LockedAsset>(
  events: readonly NormalizedEvent[],
  assets: ReadonlyMap<string, A>,
): AppendPlan<A> {
  const refused: Array<{ index: number; error: BadInputError }> = [];
  const byAsset = new Map<string, number[]>();
  events.forEach((event, i) => {
    const asset = assets.get(event.asset)!;
    if (asset.domain !== event.domain) {
      refused.push({ index: i, error: domainMismatch(event, asset.domain) });
      return;
    }
    const list = byAsset.get(event.asset);
    if (list) list.push(i);
    else byAsset.set(event.asset, [i]);
  });
  const plans: Array<AssetAppend<A>> = [];
  for (const [name, indexes] of byAsset) {
    const asset = assets.get(name)!;
    const firstOfKey = new Map<string, number>();
    for (const i of indexes) if (!firstOfKey.has(events[i]!.key)) firstOfKey.set(events[i]!.key, i);
    const rows = [...firstOfKey.values()].map((index, n) => ({
      index,
      event: events[index]!,
      seq: asset.last_seq + n + 1,
    }));
    plans.push({ asset, indexes, rows });
  }
  return { refused, assets: plans };
}

/**
 * The ranges whose stored segments the fold may rewrite: those of every row to append, new or
 * not, a superset of what the new ones touch (read in the same round trip as the append, before
 * its answer). Empty events change nothing and are left out.
 */
export function touchedRanges(plan: AssetAppend<LockedAsset>): Interval[] {
  return plan.rows
    .filter((r) => r.event.end.value > r.event.start.value)
    .map((r) => ({ start: r.event.start.value, end: r.event.end.value }));
}

/** An asset's counters after a batch that gave it new events. */
export interface AssetCounters {
  readonly id: number;
  readonly name: string;
  /** The newest seq given (it becomes `last_seq`). */
  readonly lastSeq: number;
  /** New events logged. */
  readonly count: number;
  /** Segments inserted minus segments removed. */
  readonly delta: number;
  /** The extent of the new completions (null without one), widening `covered_lo`/`covered_hi`. */
  readonly lo: number | null;
  readonly hi: number | null;
}

export interface FoldPlan {
  /** Per event of the batch, in its order. */
  readonly outcomes: CommitOutcome[];
  /** Ids of the stored segments the new events rewrite. */
  readonly removeIds: number[];
  /** The segments that replace them, per asset. */
  readonly insert: Array<{ readonly assetId: number; readonly segment: Segment }>;
  /** Per asset the log took new events for, in the plan's order: what changes on its row. */
  readonly updates: AssetCounters[];
}

/**
 * The rest of the commit, once the log has answered: `inserted` holds, per asset id, the seq of
 * each key it took (a row whose key is missing there was already logged); `stored` the stored
 * segments, per asset id, that the new events may rewrite (those touching `touchedRanges`, or
 * more). New events fold into the segments in seq order, which is ingest order.
 */
export function planFold<S extends Segment & { readonly id: number }>(
  events: readonly NormalizedEvent[],
  plan: AppendPlan<LockedAsset>,
  inserted: ReadonlyMap<number, ReadonlyMap<string, number>>,
  stored: ReadonlyMap<number, readonly S[]>,
): FoldPlan {
  const outcomes = new Array<CommitOutcome>(events.length);
  for (const { index, error } of plan.refused) outcomes[index] = { status: 'rejected', error };
  const removeIds: number[] = [];
  const insert: Array<{ assetId: number; segment: Segment }> = [];
  const updates: AssetCounters[] = [];
  for (const { asset, indexes, rows } of plan.assets) {
    const seqOf = inserted.get(asset.id) ?? new Map<string, number>();
    const firstIndex = new Set(rows.map((r) => r.index));
    for (const i of indexes) {
      const seq = firstIndex.has(i) ? seqOf.get(events[i]!.key) : undefined;
      outcomes[i] =
        seq === undefined
          ? { status: 'duplicate', assetId: asset.id }
          : { status: 'committed', assetId: asset.id, seq };
    }
    // Rows are in seq order, so changes are in ingest order.
    const changes: Change[] = rows
      .filter((r) => seqOf.has(r.event.key) && r.event.end.value > r.event.start.value)
      .map((r) => ({
        kind: r.event.kind,
        start: r.event.start.value,
        end: r.event.end.value,
        version: r.event.version,
      }));
    let delta = 0;
    if (changes.length > 0) {
      const { remove, insert: added } = applyChanges(stored.get(asset.id) ?? [], changes);
      for (const s of remove) removeIds.push(s.id);
      for (const segment of added) insert.push({ assetId: asset.id, segment });
      delta = added.length - remove.length;
    }
    if (seqOf.size === 0) continue;
    let lo: number | null = null;
    let hi: number | null = null;
    for (const c of changes) {
      if (c.kind !== 'completion') continue;
      lo = lo === null ? c.start : Math.min(lo, c.start);
      hi = hi === null ? c.end : Math.max(hi, c.end);
    }
    let lastSeq = 0;
    for (const s of seqOf.values()) lastSeq = Math.max(lastSeq, s);
    updates.push({ id: asset.id, name: asset.name, lastSeq, count: seqOf.size, delta, lo, hi });
  }
  return { outcomes, removeIds, insert, updates };
}
