import { groupBy } from '../core/group-by.js';
import { derivedState } from '../core/periods/periods.js';
import { rerunOwed, stateAfterMark } from '../core/periods/policy.js';
import {
  type LoggedEvent,
  type Touch,
  touchEvents,
  touchSeed,
  type WalkPosition,
} from '../core/periods/touches.js';
import type { Rollup } from '../core/rollups/rollup.js';
import { assetPositions } from '../store/assets/assets.js';
import { eventsAfter } from '../store/assets/event-log.js';
import { type CondemnedPeriod, condemnOutputs } from '../store/assets/outputs.js';
import { segmentSpansBelow } from '../store/assets/segments-sql.js';
import { advanceCursors, openCursors } from '../store/periods/cursors.js';
import { seenByTriggers } from '../store/periods/reads.js';
import { insertTouched, type Mark, markTouched } from '../store/periods/writes.js';
import { databaseNow, type Sql, type Tx } from '../store/pg/db.js';
import { commitWithoutFlush, limitTransaction } from '../store/pg/transaction-limits.js';

/**
 * Follows each upstream's event log from the rollup's cursor and marks every period an event
 * touches: dirty (to be evaluated), its newest change time (restarts settle) and, for a triggered
 * period, a rerun when the event is newer than what its last trigger saw. The marks and the
 * cursor advance commit together, so a crash neither loses nor repeats a mark.
 *
 * Several rollups in one transaction, their statements pipelined: a batch of outputs notifies one
 * rollup per chain it touches, and a transaction each made the next level of a cascade wait on
 * hundreds of round trips per pass. Their rows are disjoint (own periods and cursors); the output
 * condemnations of all of them go in one commit at the end (a savepoint each, interleaved, could
 * roll back each other's statements).
 * Returns the ids of the rollups for which an upstream read a full batch (`more`: there may be
 * more now), and of those that spent their MARK_BUDGET with periods left (`later`: for the next
 * pass, so that one wide span does not hold this one's evaluation).
 */
export async function markTouchedPeriods(
  sql: Sql,
  rollups: readonly Rollup[],
  batch: number,
  idleMs: number,
): Promise<{ more: string[]; later: string[] }> {
  // Pipelined (sent together, run in order): every round trip here delays the trigger. Marks are
  // derived from the durable log and commit with the cursors, so this commit need not wait for its
  // WAL flush: lost in a crash, marks and cursors are lost together and the next pass redoes them;
  // and the evaluation that follows flushes them with its commit.
  return sql.begin(async (tx) => {
    const [, , marked] = await Promise.all([
      limitTransaction(tx, idleMs),
      commitWithoutFlush(tx),
      Promise.all(rollups.map((rollup) => markRollup(tx, rollup, batch))),
    ]);
    // Periods that now owe a rerun condemn their output in this same transaction.
    await condemnOutputs(
      tx,
      rollups.map((rollup, i) => ({ rollup, periods: marked[i]!.condemned })),
    );
    return {
      more: rollups.filter((_, i) => marked[i]!.more === 'batch').map((r) => r.id),
      later: rollups.filter((_, i) => marked[i]!.more === 'budget').map((r) => r.id),
    };
  });
}

/**
 * Periods one rollup walks per transaction at most, its upstreams' events and seeds together. An
 * event or a segment over more periods is marked over several transactions, newest periods first,
 * its cursor recording where it stopped (event_below, seed_below): no walk holds the event loop
 * for long, whatever the rollups' calendars did to the periods of data accepted before them.
 */
export const MARK_BUDGET = 10_000;

/** Where a rollup's cursor on one upstream stands, and whether this pass moved it. */
interface Position extends WalkPosition {
  readonly name: string;
  readonly id: number;
}

/** Seed from every segment: a point above any segment's end (all are safe integers). */
const SEED_TOP = Number.MAX_SAFE_INTEGER;

/** One rollup's share of markTouchedPeriods: its marks, and the periods they turned rerun_pending. */
async function markRollup(
  tx: Tx,
  rollup: Rollup,
  batch: number,
  budget = MARK_BUDGET,
): Promise<{ condemned: CondemnedPeriod[]; more: 'batch' | 'budget' | false }> {
  const upstream = rollup.upstream as string[];
  // Every upstream in a few round trips: a fan-in rollup over 100 assets is not 100 transactions.
  const [cursors, assets] = await Promise.all([
    openCursors(tx, rollup.id, upstream),
    assetPositions(tx, upstream),
  ]);
  const assetOf = new Map(assets.map((a) => [a.name, a]));
  const positions: Position[] = [];
  for (const c of cursors) {
    const a = assetOf.get(c.asset_name);
    if (a === undefined) continue;
    // A rollup (or a calendar) new to an upstream starts from the merged index, not from the log:
    // the log may be long or already pruned (retention), the segments are what it left, and they
    // grow with the data's holes, not with its events. The cursor moves at once to the log
    // position the segments are read after (they hold at least that: a later statement, a later
    // snapshot); the seed goes on below seed_below, in this pass and the next ones.
    positions.push(
      c.fresh
        ? { name: a.name, id: a.id, seq: a.last_seq, eventBelow: null, seedBelow: SEED_TOP, moved: true }
        : {
            name: a.name,
            id: a.id,
            seq: c.seq,
            eventBelow: c.event_below,
            seedBelow: c.seed_below,
            moved: false,
          },
    );
  }
  const behind = positions.filter((p) => assetOf.get(p.name)!.last_seq > p.seq);
  const seeding = positions.filter((p) => p.seedBelow !== null);
  if (behind.length === 0 && seeding.length === 0) return { condemned: [], more: false };
  // Pipelined: the new events (ingested_at rounded up to the millisecond, eventsAfter: settle must
  // not end early), and the newest segments of each seed; a seed walks at least a period per span.
  const [events, spans, now] = await Promise.all([
    behind.length === 0 ? [] : eventsAfter(tx, behind, batch),
    Promise.all(
      seeding.map((p) =>
        p.seedBelow! > rollup.begin ? segmentSpansBelow(tx, p.id, rollup.begin, p.seedBelow!, budget) : [],
      ),
    ),
    seeding.length === 0 ? undefined : databaseNow(tx),
  ]);
  const byAsset: Map<number, LoggedEvent[]> = groupBy(events, (e) => e.asset_id);
  const walk = { left: budget };
  let full = false;
  let spent = false;
  const touched = new Map<string, Map<number, Touch>>();
  // The log first: new data's periods before a seed's older ones.
  for (const p of behind) {
    const read = byAsset.get(p.id);
    if (read === undefined) continue;
    const touches = new Map<number, Touch>();
    const done = touchEvents(rollup, read, p, touches, walk);
    touched.set(p.name, touches);
    // Stopped inside the batch (its budget spent), or read a full one: there may be more now.
    if (!done) spent = true;
    else if (read.length === batch) full = true;
  }
  seeding.forEach((p, i) => {
    const touches = touched.get(p.name) ?? new Map<number, Touch>();
    const found = spans[i]!;
    touchSeed(rollup, found, found.length === budget, p, touches, walk, now!);
    touched.set(p.name, touches);
    if (p.seedBelow !== null) spent = true;
  });
  const moved = positions.filter((p) => p.moved);
  const [marked] = await Promise.all([
    Promise.all(
      [...touched].map(([name, touches]) =>
        touches.size > 0 ? touchPeriods(tx, rollup, name, touches) : NOTHING_MARKED,
      ),
    ),
    moved.length === 0
      ? undefined
      : advanceCursors(
          tx,
          rollup.id,
          moved.map((p) => ({ asset: p.name, seq: p.seq, eventBelow: p.eventBelow, seedBelow: p.seedBelow })),
        ),
  ]);
  // One marking statement for every upstream: a period touched by ten upstreams' events is
  // written once per pass, not ten times (each write leaves a dead row version behind).
  const marks = mergeMarks(marked.map((m) => m.marks));
  if (marks.length > 0) await markTouched(tx, rollup.id, marks);
  return { condemned: marked.flatMap((m) => m.condemned), more: spent ? 'budget' : full ? 'batch' : false };
}

interface Marked {
  /** What marking owes each touched period (written by markTouched). */
  marks: Mark[];
  /** The periods the marks turn from triggered to rerun_pending. */
  condemned: CondemnedPeriod[];
}

const NOTHING_MARKED: Marked = { marks: [], condemned: [] };

/**
 * Gives the periods one upstream's events touched their row and works out their marks, which the
 * caller writes for all upstreams at once. The rows are locked here (seenByTriggers), so the
 * state read is the one the marks apply to.
 */
async function touchPeriods(
  tx: Tx,
  rollup: Rollup,
  asset: string,
  touches: Map<number, Touch>,
): Promise<Marked> {
  const los = [...touches.keys()];
  const ts = [...touches.values()];
  // A period gets its row when first touched, in the state it had until then (derived: waiting, or
  // missed if its deadline had already passed when the data arrived), so a stored row never
  // contradicts what the listings showed for it before.
  const states = los.map((lo, i) =>
    derivedState(rollup, { start: lo, end: ts[i]!.hi, key: ts[i]!.key }, ts[i]!.firstAt.getTime()),
  );
  // Pipelined: a period the insert creates has generation 0, so the read does not need it.
  const [, seenOf] = await Promise.all([
    insertTouched(
      tx,
      rollup.id,
      los.map((lo, i) => ({ lo, hi: ts[i]!.hi, key: ts[i]!.key, state: states[i]! })),
    ),
    seenByTriggers(tx, rollup.id, asset, los),
  ]);
  const reruns = los.map((lo, i) => rerunOwed(rollup.rerun, seenOf.get(lo)?.seen, ts[i]!));
  return {
    marks: los.map((lo, i) => ({ lo, changedAt: ts[i]!.lastChangeAt, rerun: reruns[i]! })),
    // The periods this mark turns from triggered to rerun_pending (their rows are locked above).
    condemned: los.flatMap((lo, i) => {
      const row = seenOf.get(lo);
      return row && stateAfterMark(row.state, reruns[i]!) === 'rerun_pending' && row.state === 'triggered'
        ? [{ start: lo, end: ts[i]!.hi, generation: row.generation }]
        : [];
    }),
  };
}

/**
 * One mark per period from every upstream's: the newest change, and the first rerun owed in
 * upstream order (as consecutive statements would have kept it: the first one sticks).
 */
function mergeMarks(perUpstream: readonly Mark[][]): Mark[] {
  const merged = new Map<number, Mark>();
  for (const m of perUpstream.flat()) {
    const prev = merged.get(m.lo);
    merged.set(
      m.lo,
      prev === undefined
        ? m
        : {
            lo: m.lo,
            changedAt:
              prev.changedAt === null || (m.changedAt !== null && m.changedAt > prev.changedAt)
                ? m.changedAt
                : prev.changedAt,
            rerun: prev.rerun ?? m.rerun,
          },
    );
  }
  return [...merged.values()];
}
