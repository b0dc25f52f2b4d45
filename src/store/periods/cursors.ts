/**
 * Every statement on `rollup_cursors`: how far each rollup has followed each upstream's event log
 * (the seq of the last event it marked periods for). Cursors move in the transaction of the marks
 * they account for, so a crash neither loses nor repeats a mark. Retention reads them to know
 * which events every rollup has seen (src/store/upkeep/retention.ts).
 */
import type { Rollup } from '../../core/rollups/rollup.js';
import type { Sql, Tx } from '../pg/db.js';

export interface OpenCursor {
  readonly asset_name: string;
  /** The last event whose periods are all marked. */
  readonly seq: number;
  /** The event after `seq` has its periods from this point up marked (null: none of them yet). */
  readonly event_below: number | null;
  /** Seeding from the merged segments goes on below this point (null: no seed pending). */
  readonly seed_below: number | null;
  /** Created by this call: the caller seeds it. */
  readonly fresh: boolean;
}

/**
 * The rollup's cursor on each upstream, created at 0 where it has none: `fresh` says it was just
 * created (the caller seeds it from the merged index instead of reading the whole log). The
 * existing ones are locked for the transaction (one marker of a rollup at a time) by a row lock,
 * not a no-op update: that wrote a dead row version per cursor on every pass. Pipelined: the
 * read runs after the insert, in a later snapshot, so it sees the cursors it just created too.
 */
export async function openCursors(
  tx: Tx,
  rollupId: string,
  upstream: readonly string[],
): Promise<OpenCursor[]> {
  const names = upstream as string[];
  const [created, cursors] = await Promise.all([
    tx<{ asset_name: string }[]>`
      insert into rollup_cursors (rollup_id, asset_name) select ${rollupId}, unnest(${names}::text[])
      on conflict (rollup_id, asset_name) do nothing
      returning asset_name`,
    tx<Omit<OpenCursor, 'fresh'>[]>`
      select asset_name, seq, event_below, seed_below from rollup_cursors
      where rollup_id = ${rollupId} and asset_name = any(${names}::text[])
      for update`,
  ]);
  const fresh = new Set(created.map((c) => c.asset_name));
  return cursors.map((c) => ({ ...c, fresh: fresh.has(c.asset_name) }));
}

/**
 * Moves the cursors of the upstreams just marked: to the last event all of whose periods are
 * marked, where the event after it was left (event_below), and where a seed was left
 * (seed_below). One statement for all.
 */
export async function advanceCursors(
  tx: Tx,
  rollupId: string,
  moved: ReadonlyArray<{
    asset: string;
    seq: number;
    eventBelow: number | null;
    seedBelow: number | null;
  }>,
): Promise<void> {
  await tx`
    update rollup_cursors c set seq = u.seq, event_below = u.event_below, seed_below = u.seed_below
    from unnest(
      ${moved.map((m) => m.asset)}::text[], ${moved.map((m) => m.seq)}::int8[],
      ${moved.map((m) => m.eventBelow)}::int8[],
      ${moved.map((m) => m.seedBelow)}::int8[]
    ) as u(asset, seq, event_below, seed_below)
    where c.rollup_id = ${rollupId} and c.asset_name = u.asset`;
}

/** A changed calendar: the rollup follows its upstreams again from the start (seeded from the index). */
export async function dropCursors(tx: Tx, rollupId: string): Promise<void> {
  await tx`delete from rollup_cursors where rollup_id = ${rollupId}`;
}

/**
 * Rollups with an upstream whose event log has moved past the rollup's cursor, that has no
 * cursor yet for an upstream with data to seed from, or whose seed from it is not done. A declared asset with no data yet needs none.
 */
export async function rollupsWithNewEvents(
  sql: Sql,
  rollups: ReadonlyArray<{ readonly rollup: Rollup }>,
): Promise<Set<string>> {
  const pairs = rollups.flatMap(({ rollup }) => rollup.upstream.map((asset) => [rollup.id, asset] as const));
  const rows = await sql<{ rollup_id: string }[]>`
    select distinct u.rollup_id
    from unnest(${pairs.map((p) => p[0])}::text[], ${pairs.map((p) => p[1])}::text[]) as u(rollup_id, asset)
    join assets a on a.name = u.asset
    left join rollup_cursors c on c.rollup_id = u.rollup_id and c.asset_name = u.asset
    where a.last_seq > coalesce(c.seq, 0) or (c.seq is null and a.segment_count > 0)
      or c.seed_below is not null`;
  return new Set(rows.map((r) => r.rollup_id));
}
