import { BadInputError } from '../core/errors.js';
import type { NormalizedEvent } from '../core/events.js';
import { applyChanges } from '../core/segments.js';
import type { Change } from '../core/types.js';
import { type AssetRow, lockAssets } from './assets.js';
import type { Sql, Tx } from './db.js';
import { replaceSegments, segmentsTouching } from './segments-sql.js';

/** Per event, in input order: accepted now, seen before (same key), or refused by the index. */
export type CommitOutcome =
  | { readonly status: 'committed'; readonly assetId: number; readonly seq: number }
  | { readonly status: 'duplicate'; readonly assetId: number }
  | { readonly status: 'rejected'; readonly error: BadInputError };

/** Wakes the scheduler when a batch commits (delivered only on commit, coalesced per transaction). */
export const EVENTS_CHANNEL = 'coverage_rollup_events';

/**
 * Commits a batch of normalised events in one transaction: appends them to the log (skipping
 * keys already there), then folds the new ones into each asset's merged segments in ingest order.
 */
export async function commitEvents(sql: Sql, events: readonly NormalizedEvent[]): Promise<CommitOutcome[]> {
  if (events.length === 0) return [];
  return sql.begin(async (tx) => {
    const assets = await lockAssets(
      tx,
      uniqueBy(events, (e) => e.asset).map((e) => ({ name: e.asset, domain: e.domain, zone: e.zone })),
    );
    const outcomes = new Array<CommitOutcome>(events.length);
    const byAsset = new Map<string, number[]>();
    events.forEach((event, i) => {
      const asset = assets.get(event.asset)!;
      if (asset.domain !== event.domain) {
        outcomes[i] = {
          status: 'rejected',
          error: new BadInputError(
            'domain_mismatch',
            `asset ${event.asset} holds ${asset.domain} bounds but this event's are ${event.domain}`,
          ),
        };
        return;
      }
      const list = byAsset.get(event.asset);
      if (list) list.push(i);
      else byAsset.set(event.asset, [i]);
    });
    for (const [name, indexes] of byAsset) {
      await commitAsset(tx, assets.get(name)!, events, indexes, outcomes);
    }
    await tx`select pg_notify(${EVENTS_CHANNEL}, '')`;
    return outcomes;
  });
}

async function commitAsset(
  tx: Tx,
  asset: AssetRow,
  events: readonly NormalizedEvent[],
  indexes: readonly number[],
  outcomes: CommitOutcome[],
): Promise<void> {
  const firstOfKey = new Map<string, number>();
  for (const i of indexes) if (!firstOfKey.has(events[i]!.key)) firstOfKey.set(events[i]!.key, i);
  const candidates = [...firstOfKey.values()];
  const rows = candidates.map((i, n) => ({ event: events[i]!, seq: asset.last_seq + n + 1 }));
  const inserted = await tx<{ key: string; seq: number }[]>`
    insert into events (asset_id, seq, key, kind, lo, hi, start_text, end_text, version, event_id, produced_at, extra)
    select ${asset.id}, seq, key, kind, lo, hi, start_text, end_text, version, event_id, produced_at, extra::jsonb
    from unnest(
      ${rows.map((r) => r.seq)}::int8[], ${rows.map((r) => r.event.key)}::text[],
      ${rows.map((r) => r.event.kind)}::text[], ${rows.map((r) => r.event.start.value)}::int8[],
      ${rows.map((r) => r.event.end.value)}::int8[], ${rows.map((r) => r.event.start.text)}::text[],
      ${rows.map((r) => r.event.end.text)}::text[], ${rows.map((r) => r.event.version)}::text[],
      ${rows.map((r) => r.event.id)}::text[], ${rows.map((r) => r.event.producedAt)}::text[],
      ${rows.map((r) => JSON.stringify(r.event.extra))}::text[]
    ) as t(seq, key, kind, lo, hi, start_text, end_text, version, event_id, produced_at, extra)
    -- JSON travels as text: postgres.js would encode a jsonb[] element as a JSON string.
    on conflict (asset_id, key) do nothing
    returning key, seq`;
  const seqOf = new Map(inserted.map((r) => [r.key, r.seq]));
  for (const i of indexes) {
    const seq = firstOfKey.get(events[i]!.key) === i ? seqOf.get(events[i]!.key) : undefined;
    outcomes[i] =
      seq === undefined
        ? { status: 'duplicate', assetId: asset.id }
        : { status: 'committed', assetId: asset.id, seq };
  }
  if (inserted.length === 0) return;

  const changes: Change[] = rows
    .filter((r) => seqOf.has(r.event.key) && r.event.end.value > r.event.start.value)
    .map((r) => ({
      kind: r.event.kind,
      start: r.event.start.value,
      end: r.event.end.value,
      version: r.event.version,
    }));
  let segmentDelta = 0;
  if (changes.length > 0) {
    const existing = await segmentsTouching(tx, asset.id, changes);
    const { remove, insert } = applyChanges(existing, changes);
    await replaceSegments(tx, asset.id, remove, insert);
    segmentDelta = insert.length - remove.length;
  }
  let lo: number | null = null;
  let hi: number | null = null;
  for (const c of changes) {
    if (c.kind !== 'completion') continue;
    lo = lo === null ? c.start : Math.min(lo, c.start);
    hi = hi === null ? c.end : Math.max(hi, c.end);
  }
  await tx`
    update assets set
      last_seq = ${inserted.reduce((max, r) => Math.max(max, r.seq), 0)},
      event_count = event_count + ${inserted.length},
      segment_count = segment_count + ${segmentDelta},
      covered_lo = least(covered_lo, ${lo}::int8),
      covered_hi = greatest(covered_hi, ${hi}::int8),
      updated_at = now()
    where id = ${asset.id}`;
}

function uniqueBy<T>(items: readonly T[], key: (item: T) => string): T[] {
  const seen = new Map<string, T>();
  for (const item of items) if (!seen.has(key(item))) seen.set(key(item), item);
  return [...seen.values()];
}
