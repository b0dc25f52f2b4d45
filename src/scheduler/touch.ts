import { groupBy } from '../core/group-by.js';
import { derivedState } from '../core/periods.js';
import { rerunOwed, stateAfterMark } from '../core/policy.js';
import type { Rollup } from '../core/rollup.js';
import { type CondemnedPeriod, condemnOutputs } from '../store/assets/outputs.js';
import { advanceCursors, openCursors, setCursor } from '../store/periods/cursors.js';
import { seenByTriggers } from '../store/periods/reads.js';
import { insertTouched, type Mark, markTouched } from '../store/periods/writes.js';
import type { Sql, Tx } from '../store/pg/db.js';
import { limitTransaction } from './transaction-limits.js';

interface EventRow {
  seq: number;
  kind: 'completion' | 'replay_requirement';
  lo: number;
  hi: number;
  ingested_at: Date;
}

interface Touch {
  hi: number;
  key: string;
  /** When the first event touching it arrived: a period first touched after its deadline was already missed. */
  firstAt: Date;
  lastChangeAt: Date | null;
  completionSeq: number;
  replaySeq: number;
}

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
 * Returns the ids of the rollups for which an upstream read a full batch: there may be more now.
 */
export async function markTouchedPeriods(
  sql: Sql,
  rollups: readonly Rollup[],
  batch: number,
  idleMs: number,
): Promise<string[]> {
  // Pipelined (sent together, run in order): every round trip here delays the trigger. Marks are
  // derived from the durable log and commit with the cursors, so this commit need not wait for its
  // WAL flush: lost in a crash, marks and cursors are lost together and the next pass redoes them;
  // and the evaluation that follows flushes them with its commit.
  return sql.begin(async (tx) => {
    const [, , marked] = await Promise.all([
      limitTransaction(tx, idleMs),
      tx`select set_config('synchronous_commit', 'off', true)`,
      Promise.all(rollups.map((rollup) => markRollup(tx, rollup, batch))),
    ]);
    // Periods that now owe a rerun condemn their output in this same transaction.
    await condemnOutputs(
      tx,
      rollups.map((rollup, i) => ({ rollup, periods: marked[i]!.condemned })),
    );
    return rollups.filter((_, i) => marked[i]!.more).map((r) => r.id);
  });
}

/** One rollup's share of markTouchedPeriods: its marks, and the periods they turned rerun_pending. */
async function markRollup(
  tx: Tx,
  rollup: Rollup,
  batch: number,
): Promise<{ condemned: CondemnedPeriod[]; more: boolean }> {
  const upstream = rollup.upstream as string[];
  // Every upstream in a few round trips: a fan-in rollup over 100 assets is not 100 transactions.
  const [cursors, assets] = await Promise.all([
    openCursors(tx, rollup.id, upstream),
    tx<{ name: string; id: number; last_seq: number }[]>`
      select name, id, last_seq from assets where name = any(${upstream}::text[])`,
  ]);
  const assetOf = new Map(assets.map((a) => [a.name, a]));
  const seeds: Promise<void>[] = [];
  const behind: Array<{ name: string; id: number; seq: number }> = [];
  for (const c of cursors) {
    const a = assetOf.get(c.asset_name);
    if (a === undefined) continue;
    if (c.fresh) seeds.push(seedFromSegments(tx, rollup, a.name, a.id, a.last_seq));
    else if (a.last_seq > c.seq) behind.push({ name: a.name, id: a.id, seq: c.seq });
  }
  await Promise.all(seeds);
  if (behind.length === 0) return { condemned: [], more: false };
  // ingested_at rounded up to the millisecond: a JS Date drops the microseconds, and settle
  // must not end before `ingested_at + settle` in database time. The log's seq index keys buckets
  // of 8 (seq >> 3, migration 0013): the bucket bounds the index scan, seq the rows, and the order
  // by bucket then seq lets the index give the order (each bucket sorted on its own).
  const events = await tx<(EventRow & { asset_id: number })[]>`
    select u.asset_id, e.seq, case when e.replay then 'replay_requirement' else 'completion' end as kind, e.lo, e.hi,
      date_trunc('milliseconds', e.ingested_at)
        + case when date_trunc('milliseconds', e.ingested_at) < e.ingested_at then interval '1 millisecond' else interval '0' end
        as ingested_at
    from unnest(${behind.map((b) => b.id)}::int8[], ${behind.map((b) => b.seq)}::int8[]) as u(asset_id, seq)
    cross join lateral (
      select seq, replay, lo, hi, ingested_at from events
      where asset_id = u.asset_id and seq >> 3 >= u.seq >> 3 and seq > u.seq
      order by seq >> 3, seq limit ${batch}
    ) e
    order by u.asset_id, e.seq`;
  const byAsset: Map<number, EventRow[]> = groupBy(events, (e) => e.asset_id);
  const moved = behind.filter((b) => byAsset.has(b.id));
  const [marked] = await Promise.all([
    Promise.all(
      moved.map((b) => {
        const touches = touchedPeriods(rollup, byAsset.get(b.id)!);
        return touches.size > 0 ? touchPeriods(tx, rollup, b.name, touches) : NOTHING_MARKED;
      }),
    ),
    moved.length === 0
      ? undefined
      : advanceCursors(
          tx,
          rollup.id,
          moved.map((b) => ({ asset: b.name, seq: byAsset.get(b.id)!.at(-1)!.seq })),
        ),
  ]);
  // One marking statement for every upstream: a period touched by ten upstreams' events is
  // written once per pass, not ten times (each write leaves a dead row version behind).
  const marks = mergeMarks(marked.map((m) => m.marks));
  if (marks.length > 0) await markTouched(tx, rollup.id, marks);
  // A full read from any upstream: there may be more to mark now.
  return {
    condemned: marked.flatMap((m) => m.condemned),
    more: moved.some((b) => byAsset.get(b.id)!.length === batch),
  };
}

/**
 * A rollup (or a calendar) new to an upstream starts from the merged index, not from the log:
 * the log may be long or already pruned (retention), the segments are what it left, and they
 * grow with the data's holes, not with its events. Every period they touch gets its row, then
 * the cursor moves to the log position the segments were read after. No rerun is owed for this.
 */
async function seedFromSegments(tx: Tx, rollup: Rollup, asset: string, assetId: number, lastSeq: number) {
  // Read after last_seq (a later statement, a later snapshot): the segments hold at least that.
  const [[clock], segments] = await Promise.all([
    tx<{ now: Date }[]>`select clock_timestamp() as now`,
    tx<{ lo: number; hi: number }[]>`
      select lower(span) as lo, upper(span) as hi from segments
      where asset_id = ${assetId} and span && int8range(${rollup.begin}, null)`,
  ]);
  const seen = segments.map((s) => ({ seq: 0, kind: 'completion' as const, ...s, ingested_at: clock!.now }));
  const touches = touchedPeriods(rollup, seen);
  for (const t of touches.values()) t.lastChangeAt = null;
  const [marked] = await Promise.all([
    touches.size > 0 ? touchPeriods(tx, rollup, asset, touches) : NOTHING_MARKED,
    setCursor(tx, rollup.id, asset, lastSeq),
  ]);
  if (marked.marks.length > 0) await markTouched(tx, rollup.id, marked.marks);
}

function touchedPeriods(rollup: Rollup, events: readonly EventRow[]): Map<number, Touch> {
  const touches = new Map<number, Touch>();
  for (const e of events) {
    const start = Math.max(e.lo, rollup.begin);
    if (e.hi <= start) continue;
    for (const p of periodsOf(rollup, start, e.hi)) {
      const t = touches.get(p.start) ?? {
        hi: p.end,
        key: p.key,
        firstAt: e.ingested_at,
        lastChangeAt: null,
        completionSeq: 0,
        replaySeq: 0,
      };
      if (e.kind === 'completion') {
        t.completionSeq = Math.max(t.completionSeq, e.seq);
        if (!t.lastChangeAt || e.ingested_at > t.lastChangeAt) t.lastChangeAt = e.ingested_at;
      } else {
        t.replaySeq = Math.max(t.replaySeq, e.seq);
      }
      touches.set(p.start, t);
    }
  }
  return touches;
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

/** Every period overlapping [start, end), paged so one very wide event cannot hit the calendar's cap. */
function* periodsOf(rollup: Rollup, start: number, end: number) {
  for (let from = start; from < end; ) {
    const page = rollup.calendar.periodsOverlapping({ start: from, end }, PAGE);
    if (page.length === 0) return;
    yield* page;
    from = page.at(-1)!.end;
  }
}

const PAGE = 10_000;
