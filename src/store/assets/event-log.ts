/** The event log read forward, asset by asset, from a position: what a rollup's marking follows. */
import type { Db } from '../pg/db.js';

/** One logged change as marking reads it; `ingested_at` rounded up to the millisecond. */
export interface LoggedChange {
  readonly asset_id: number;
  readonly seq: number;
  readonly kind: 'completion' | 'replay_requirement';
  readonly lo: number;
  readonly hi: number;
  readonly ingested_at: Date;
}

/**
 * Up to `batch` events of each asset after its `seq`, by asset then seq. ingested_at is rounded up
 * to the millisecond: a JS Date drops the microseconds, and settle must not end before
 * `ingested_at + settle` in database time. The log's seq index keys buckets of 8 (seq >> 3,
 * migration 0013): the bucket bounds the index scan, seq the rows, and the order by bucket then seq
 * lets the index give the order (each bucket sorted on its own).
 */
export async function eventsAfter(
  db: Db,
  from: ReadonlyArray<{ readonly id: number; readonly seq: number }>,
  batch: number,
): Promise<LoggedChange[]> {
  return db<LoggedChange[]>`
    select u.asset_id, e.seq, case when e.replay then 'replay_requirement' else 'completion' end as kind, e.lo, e.hi,
      date_trunc('milliseconds', e.ingested_at)
        + case when date_trunc('milliseconds', e.ingested_at) < e.ingested_at then interval '1 millisecond' else interval '0' end
        as ingested_at
    from unnest(${from.map((b) => b.id)}::int8[], ${from.map((b) => b.seq)}::int8[]) as u(asset_id, seq)
    cross join lateral (
      select seq, replay, lo, hi, ingested_at from events
      where asset_id = u.asset_id and seq >> 3 >= u.seq >> 3 and seq > u.seq
      order by seq >> 3, seq limit ${batch}
    ) e
    order by u.asset_id, e.seq`;
}
