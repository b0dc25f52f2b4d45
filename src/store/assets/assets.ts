import type { Domain } from '../../core/types.js';
import type { Db } from '../pg/db.js';

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

/** Up to `limit` assets by name after `after` (a keyset page), optionally those whose name contains `q`. */
export async function assetsByName(
  sql: Db,
  opts: { readonly q?: string | undefined; readonly after: string | null; readonly limit: number },
): Promise<AssetRow[]> {
  const like = opts.q === undefined ? null : likePattern(opts.q);
  return sql<AssetRow[]>`
    select * from assets
    where (${opts.after}::text is null or name > ${opts.after}::text)
      and (${like}::text is null or name ilike ${like}::text)
    order by name limit ${opts.limit}`;
}

/** How many assets there are, or how many whose name contains `q`. */
export async function countAssets(sql: Db, q: string | undefined): Promise<number> {
  const like = q === undefined ? null : likePattern(q);
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int8 as n from assets where (${like}::text is null or name ilike ${like}::text)`;
  return row!.n;
}

const likePattern = (q: string) => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** Each asset's configured freshness.max_lag and the clock it is judged by, for stale-first paging. */
export interface StaleOrder {
  readonly maxLags: ReadonlyMap<string, number>;
  readonly nowMs: number;
}

/**
 * One page of assets, stalest first: assets past their freshness.max_lag first (a time asset by
 * the end of its extent, an integer asset by its last commit; the page then shows the exact
 * freshness), then time assets by the end of their coverage (oldest first, none first), then
 * integer assets, then by name. Optionally only the named ones, or those whose name contains `q`
 * (case-insensitive).
 */
export async function pageAssets(
  sql: Db,
  opts: {
    readonly names?: readonly string[] | undefined;
    readonly q?: string | undefined;
    readonly offset: number;
    readonly limit: number;
    readonly stale?: StaleOrder | undefined;
  },
): Promise<{ rows: AssetRow[]; total: number }> {
  const names = opts.names ? [...opts.names] : null;
  const like = opts.q === undefined ? null : likePattern(opts.q);
  const lags = [...(opts.stale?.maxLags ?? new Map<string, number>())];
  const nowMs = opts.stale?.nowMs ?? 0;
  const rows = await sql<(AssetRow & { total: number })[]>`
    select a.*, count(*) over () as total
    from assets a
    left join unnest(${lags.map(([n]) => n)}::text[], ${lags.map(([, ms]) => Math.round(ms))}::int8[]) as f(name, lag_ms)
      on f.name = a.name
    where (${names}::text[] is null or a.name = any(${names}::text[]))
      and (${like}::text is null or a.name ilike ${like}::text)
    order by
      f.lag_ms is not null and case when a.domain = 'time'
        then a.covered_hi is null or a.covered_hi < (${nowMs}::int8 - f.lag_ms) * 1000
        else a.updated_at < to_timestamp((${nowMs}::int8 - f.lag_ms) / 1000.0) end desc,
      a.domain <> 'time', a.covered_hi asc nulls first, a.name
    offset ${opts.offset} limit ${opts.limit}`;
  return { rows, total: rows[0]?.total ?? 0 };
}

/** The recorded domain of each named asset the index has seen. */
export async function domainsOf(sql: Db, names: readonly string[]): Promise<Map<string, Domain>> {
  if (names.length === 0) return new Map();
  const rows = await sql<Pick<AssetRow, 'name' | 'domain'>[]>`
    select name, domain from assets where name = any(${names}::text[])`;
  return new Map(rows.map((r) => [r.name, r.domain]));
}

export interface DeclaredAsset {
  readonly name: string;
  readonly domain?: Domain | undefined;
  readonly zone: string;
}

/**
 * Registers the assets config declares with a domain, so they are known (all gap) before their
 * first event. A recorded asset keeps its domain and zone (first sight wins, as in ingest); the
 * declarations that contradict the record are returned, for the daemon to warn about.
 */
export async function registerDeclaredAssets(
  sql: Db,
  declared: readonly DeclaredAsset[],
): Promise<Array<{ declared: DeclaredAsset; recorded: Pick<AssetRow, 'domain' | 'zone'> }>> {
  if (declared.length === 0) return [];
  const typed = declared.filter((a) => a.domain !== undefined);
  if (typed.length > 0) {
    await sql`
      insert into assets (name, domain, zone)
      select * from unnest(
        ${typed.map((a) => a.name)}::text[], ${typed.map((a) => a.domain!)}::text[], ${typed.map((a) => a.zone)}::text[]
      )
      on conflict (name) do nothing`;
  }
  const rows = await sql<Pick<AssetRow, 'name' | 'domain' | 'zone'>[]>`
    select name, domain, zone from assets where name = any(${declared.map((a) => a.name)}::text[])`;
  const recorded = new Map(rows.map((r) => [r.name, r]));
  return declared.flatMap((a) => {
    const r = recorded.get(a.name);
    if (r === undefined || ((a.domain === undefined || a.domain === r.domain) && a.zone === r.zone))
      return [];
    return [{ declared: a, recorded: { domain: r.domain, zone: r.zone } }];
  });
}

/** Each named asset's last_seq (an asset without a row has none): what a scan compares to learn nothing changed. */
export async function lastSeqs(db: Db, names: readonly string[]): Promise<Map<string, number>> {
  if (names.length === 0) return new Map();
  const rows = await db<{ name: string; last_seq: number }[]>`
    select name, last_seq from assets where name = any(${[...names]}::text[])`;
  return new Map(rows.map((r) => [r.name, r.last_seq]));
}

/** Each named asset that has a row: its id and last_seq, where a rollup's marking reads on from. */
export async function assetPositions(
  db: Db,
  names: readonly string[],
): Promise<{ name: string; id: number; last_seq: number }[]> {
  return db<{ name: string; id: number; last_seq: number }[]>`
    select name, id, last_seq from assets where name = any(${[...names]}::text[])`;
}
