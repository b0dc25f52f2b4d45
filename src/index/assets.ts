import type { Domain } from '../core/types.js';
import type { Db } from './db.js';

export interface AssetRow {
  readonly id: number;
  readonly name: string;
  readonly domain: Domain;
  readonly zone: string;
  readonly last_seq: number;
  readonly event_count: number;
  readonly segment_count: number;
  readonly covered_lo: number | null;
  readonly covered_hi: number | null;
  readonly created_at: Date;
  readonly updated_at: Date;
}

export interface NewAsset {
  readonly name: string;
  readonly domain: Domain;
  readonly zone: string;
}

/**
 * Registers unseen assets and locks every named asset row until the transaction ends: this lock
 * is what serialises per-asset writes across processes. Rows are taken in name order so two
 * batches never deadlock on each other.
 */
export async function lockAssets(tx: Db, assets: readonly NewAsset[]): Promise<Map<string, AssetRow>> {
  const sorted = [...assets].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const rows = await tx<AssetRow[]>`
    insert into assets (name, domain, zone)
    select * from unnest(
      ${sorted.map((a) => a.name)}::text[], ${sorted.map((a) => a.domain)}::text[], ${sorted.map((a) => a.zone)}::text[]
    )
    on conflict (name) do update set updated_at = now()
    returning *`.execute();
  return new Map(rows.map((r) => [r.name, r]));
}

export async function findAsset(sql: Db, name: string): Promise<AssetRow | undefined> {
  const [row] = await sql<AssetRow[]>`select * from assets where name = ${name}`;
  return row;
}

export async function listAssets(sql: Db): Promise<AssetRow[]> {
  return sql<AssetRow[]>`select * from assets order by name`;
}

/** The recorded domain of each named asset the index has seen. */
export async function domainsOf(sql: Db, names: readonly string[]): Promise<Map<string, Domain>> {
  if (names.length === 0) return new Map();
  const rows = await sql<Pick<AssetRow, 'name' | 'domain'>[]>`
    select name, domain from assets where name = any(${names}::text[])`;
  return new Map(rows.map((r) => [r.name, r.domain]));
}
