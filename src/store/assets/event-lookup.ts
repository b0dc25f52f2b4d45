/**
 * Which events the log holds, by asset and idempotency key: what the reconciliation of failed
 * jobs asks (src/ingest/failed-reconcile.ts). It reads through events_key on every live
 * partition and checks the asset on what the hash finds, as the commit's duplicate check does
 * (store/assets/event-append.ts).
 */
import type { Db } from '../pg/db.js';

export interface EventRef {
  readonly asset: string;
  readonly key: string;
}

/** `asset + "\0" + key` of each given event that is committed. */
export async function committedEvents(sql: Db, refs: readonly EventRef[]): Promise<Set<string>> {
  if (refs.length === 0) return new Set();
  const rows = await sql<{ asset: string; key: string }[]>`
    select u.asset, u.key
    from unnest(${refs.map((r) => r.asset)}::text[], ${refs.map((r) => r.key)}::text[]) as u(asset, key)
    join assets a on a.name = u.asset
    where (
      select bool_or(e.asset_id = a.id) from events e
      where hashtextextended(event_key(e.event_id, e.event_id_hex, e.digest), e.asset_id) = hashtextextended(u.key, a.id)
        and event_key(e.event_id, e.event_id_hex, e.digest) = u.key)`;
  return new Set(rows.map((r) => refKey(r)));
}

export const refKey = (r: EventRef): string => `${r.asset}\u0000${r.key}`;
