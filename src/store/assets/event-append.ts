import type { AssetAppend } from '../../core/events/commit-plan.js';
import { isHexId, producedAtDigits, textUnlessCanonical } from '../../core/events/event-row.js';
import type { Db } from '../pg/db.js';
import type { AssetRow } from './assets.js';

/** One asset's share of a batch, as core's commit plan lays it out. */
export type AssetPlan = AssetAppend<AssetRow>;

/**
 * Appends every plan's rows in one statement; returns, per asset id, the seq of each new key. The
 * rows travel as one JSON document: JSON.stringify is far cheaper on the event loop than
 * serialising a dozen parameter arrays element by element. It is sent as json text, not jsonb:
 * PostgreSQL reads each field once, so building the binary form first is wasted work; `extra` is
 * stored as that json text (JSON.stringify's, key order kept as it reached us: BullMQ's PostgreSQL backend
 * stores job data as jsonb, which has already ordered keys its own way).
 *
 * A key already in any live partition is a duplicate. No unique index can say so across
 * partitions (it would have to contain ingest time); the check is race-free because the caller
 * holds the row lock of every asset in the batch, which serialises its writers. The lookup is a
 * lateral subquery so it stays one index probe per key and partition: as NOT EXISTS the planner
 * may hash-join the batch against a scan of the whole log. It finds candidates by the key's hash
 * (seeded with the asset) alone and checks the asset on them: `asset_id = ` in the condition let
 * the planner AND the hash index with (asset_id, seq), reading every entry of the asset in each
 * partition per key (direct commits of realistic content 2-5x slower once 120,000 events were in).
 */
export async function insertEvents(
  tx: Db,
  plans: readonly AssetPlan[],
  at: Date | null,
): Promise<Map<number, Map<string, number>>> {
  const rows = plans.flatMap((p) =>
    p.rows.map(({ event, seq }) => {
      const hexId = event.id !== null && isHexId(event.id);
      const digits = event.producedAt === null ? null : producedAtDigits(event.producedAt);
      return {
        a: p.asset.id,
        q: seq,
        k: event.key,
        r: event.kind === 'replay_requirement',
        l: event.start.value,
        h: event.end.value,
        s: textUnlessCanonical(event.domain, event.start),
        e: textUnlessCanonical(event.domain, event.end),
        v: event.version,
        i: hexId ? null : event.id,
        // A hex id as its bytes: 20 instead of 40 characters for a commit or job digest.
        j: hexId ? event.id : null,
        // The content digest, when the key is one (no producer id): 16 bytes instead of 39 chars.
        d: event.id === null ? event.key.slice(CONTENT_KEY_PREFIX.length) : null,
        // produced_at as an instant and its digit count when they spell it back, else as text.
        p: digits === null ? null : event.producedAt,
        g: digits,
        t: digits === null ? event.producedAt : null,
        x: Object.keys(event.extra).length > 0 ? event.extra : null,
      };
    }),
  );
  const inserted = await tx<{ asset_id: number; key: string; seq: number }[]>`
    insert into events (asset_id, seq, replay, lo, hi, start_text, end_text, version, event_id, event_id_hex, digest,
      produced_at, produced_at_digits, produced_at_text, extra, ingested_at)
    select a, q, r, l, h, s, e, v, i, decode(j, 'hex'), decode(d, 'hex'), p::timestamptz, g, t, x,
      coalesce(${at}::timestamptz, now())
    from json_to_recordset(${JSON.stringify(rows)}::text::json)
      as r(a int8, q int8, k text, r bool, l int8, h int8, s text, e text, v text, i text, j text, d text,
        p text, g int2, t text, x json)
    left join lateral (
      select bool_or(o.asset_id = r.a) as hit from events o
      where hashtextextended(event_key(o.event_id, o.event_id_hex, o.digest), o.asset_id) = hashtextextended(r.k, r.a)
        and event_key(o.event_id, o.event_id_hex, o.digest) = r.k
    ) as seen on true
    where seen.hit is not true
    returning asset_id, event_key(event_id, event_id_hex, digest) as key, seq`.execute();
  const out = new Map<number, Map<string, number>>();
  for (const r of inserted) {
    const m = out.get(r.asset_id) ?? new Map<string, number>();
    out.set(r.asset_id, m);
    m.set(r.key, r.seq);
  }
  return out;
}

const CONTENT_KEY_PREFIX = 'sha256:';
