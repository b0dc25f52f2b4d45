import type { Rollup } from '../core/rollup.js';
import type { Sql, Tx } from '../index/db.js';
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
  lastChangeAt: Date | null;
  completionSeq: number;
  replaySeq: number;
}

/**
 * Follows each upstream's event log from the rollup's cursor and marks every period an event
 * touches: dirty (to be evaluated), its newest change time (restarts settle) and, for a triggered
 * period, a rerun when the event is newer than what its last trigger saw. The marks and the
 * cursor advance commit together, so a crash neither loses nor repeats a mark.
 * Returns whether an upstream read a full batch: there may be more to mark now.
 */
export async function markTouchedPeriods(
  sql: Sql,
  rollup: Rollup,
  batch: number,
  idleMs: number,
): Promise<boolean> {
  let more = false;
  for (const asset of rollup.upstream) {
    const read = await sql.begin(async (tx) => {
      // Pipelined (sent together, run in order): every round trip here delays the trigger.
      // Marks are derived from the durable log and commit with the cursor, so this commit need
      // not wait for its WAL flush: lost in a crash, marks and cursor are lost together and the
      // next pass redoes them; and the evaluation that follows flushes them with its own commit.
      const [, , [cursor]] = await Promise.all([
        limitTransaction(tx, idleMs),
        tx`select set_config('synchronous_commit', 'off', true)`,
        tx<{ seq: number; asset_id: number | null; last_seq: number | null }[]>`
          insert into rollup_cursors (rollup_id, asset_name) values (${rollup.id}, ${asset})
          on conflict (rollup_id, asset_name) do update set seq = rollup_cursors.seq
          returning seq,
            (select id from assets where name = ${asset}) as asset_id,
            (select last_seq from assets where name = ${asset}) as last_seq`,
      ]);
      if (!cursor || cursor.asset_id === null || (cursor.last_seq ?? 0) <= cursor.seq) return 0;
      // ingested_at rounded up to the millisecond: a JS Date drops the microseconds, and settle
      // must not end before `ingested_at + settle` in database time.
      const events = await tx<EventRow[]>`
        select seq, case when replay then 'replay_requirement' else 'completion' end as kind, lo, hi,
          date_trunc('milliseconds', ingested_at)
            + case when date_trunc('milliseconds', ingested_at) < ingested_at then interval '1 millisecond' else interval '0' end
            as ingested_at
        from events
        where asset_id = ${cursor.asset_id} and seq > ${cursor.seq}
        order by seq limit ${batch}`;
      if (events.length === 0) return 0;
      const touches = touchedPeriods(rollup, events);
      await Promise.all([
        touches.size > 0 ? markPeriods(tx, rollup, asset, touches) : undefined,
        tx`
          update rollup_cursors set seq = ${events.at(-1)!.seq}
          where rollup_id = ${rollup.id} and asset_name = ${asset}`,
      ]);
      return events.length;
    });
    if (read === batch) more = true;
  }
  return more;
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

async function markPeriods(
  tx: Tx,
  rollup: Rollup,
  asset: string,
  touches: Map<number, Touch>,
): Promise<void> {
  const los = [...touches.keys()];
  const ts = [...touches.values()];
  // Periods beyond the materialised range exist as soon as an event touches them.
  // Pipelined: a period the insert creates has generation 0, so the read does not need it.
  const [, triggered] = await Promise.all([
    tx`
      insert into periods (rollup_id, lo, hi, key)
      select ${rollup.id}, * from unnest(${los}::int8[], ${ts.map((t) => t.hi)}::int8[], ${ts.map((t) => t.key)}::text[])
      on conflict do nothing`,
    tx<{ lo: number; seen: number | null }[]>`
      select lo, (trigger_seqs ->> ${asset})::int8 as seen from periods
      where rollup_id = ${rollup.id} and lo = any(${los}::int8[]) and generation > 0`,
  ]);
  const seenOf = new Map(triggered.map((r) => [r.lo, r.seen ?? 0]));
  const reruns = los.map((lo, i) => {
    const seen = seenOf.get(lo);
    const t = ts[i]!;
    if (seen === undefined || rollup.rerun === 'never') return null;
    if (t.replaySeq > seen) return 'replay';
    if (rollup.rerun === 'on_update' && t.completionSeq > seen) return 'update';
    return null;
  });
  await tx`
    update periods p set
      dirty = true,
      last_change_at = greatest(p.last_change_at, u.changed_at),
      rerun = coalesce(p.rerun, u.rerun),
      state = case when u.rerun is not null and p.state = 'triggered' then 'rerun_pending' else p.state end,
      updated_at = now()
    from unnest(
      ${los}::int8[], ${ts.map((t) => t.lastChangeAt?.toISOString() ?? null)}::timestamptz[], ${reruns}::text[]
    ) as u(lo, changed_at, rerun)
    where p.rollup_id = ${rollup.id} and p.lo = u.lo`;
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
