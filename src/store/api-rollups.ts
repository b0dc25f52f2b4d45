/**
 * Rollups written through the API (`api_rollups`), and the notification that tells every instance
 * the catalog changed: an API rollup written or deleted (by id), or a config file reloaded.
 */
import type { ApiRollup } from '../config/catalog.js';
import type { Sql, Tx } from './pg/db.js';

export const CATALOG_CHANNEL = 'coverage_rollup_catalog';

/** What a catalog notification says: an API rollup's id, or a reload of the file by an instance. */
export type CatalogNotice = { readonly api: string } | { readonly file: string };

interface Row {
  id: string;
  definition: unknown;
  written_by: string;
  written_at: Date;
}

const apiRollup = (r: Row): ApiRollup => ({
  id: r.id,
  definition: r.definition,
  writtenBy: r.written_by,
  writtenAt: r.written_at,
});

export async function listApiRollups(sql: Sql | Tx): Promise<ApiRollup[]> {
  const rows = await sql<Row[]>`
    select id, definition, written_by, written_at from api_rollups order by id`;
  return rows.map(apiRollup);
}

export async function readApiRollup(sql: Sql | Tx, id: string): Promise<ApiRollup | undefined> {
  const [row] = await sql<Row[]>`
    select id, definition, written_by, written_at from api_rollups where id = ${id}`;
  return row && apiRollup(row);
}

/**
 * Serialises writers of the catalog for the rest of the transaction: each checks the whole catalog
 * as it is, so two writes (a chain written in two PUTs) never pass on views that miss each other.
 */
export async function lockCatalog(tx: Tx): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtext('coverage-rollup.catalog'))`;
}

export async function writeApiRollup(
  tx: Tx,
  id: string,
  definition: unknown,
  by: string,
): Promise<ApiRollup> {
  const [row] = await tx<Row[]>`
    insert into api_rollups (id, definition, written_by)
    values (${id}, ${tx.json(definition as never)}, ${by})
    on conflict (id) do update set definition = excluded.definition, written_by = excluded.written_by,
      written_at = now()
    returning id, definition, written_by, written_at`;
  return apiRollup(row!);
}

/** Deletes an API rollup's definition (its history stays); whether there was one. */
export async function deleteApiRollup(tx: Tx, id: string): Promise<boolean> {
  const deleted = await tx`delete from api_rollups where id = ${id}`;
  return deleted.count > 0;
}

/** Tells every instance, once `tx` commits (or at once, given the pool). */
export async function notifyCatalog(sql: Sql | Tx, notice: CatalogNotice): Promise<void> {
  await sql`select pg_notify(${CATALOG_CHANNEL}, ${JSON.stringify(notice)})`;
}

/**
 * Listens for catalog notifications on a connection postgres.js re-establishes after a loss;
 * `onConnect` runs on each (re)connection, when notifications may have been missed.
 */
export async function listenForCatalog(
  sql: Sql,
  onNotice: (notice: CatalogNotice) => void,
  onConnect: () => void,
): Promise<() => Promise<void>> {
  const listener = await sql.listen(
    CATALOG_CHANNEL,
    (payload) => {
      const notice = parseNotice(payload);
      if (notice) onNotice(notice);
    },
    onConnect,
  );
  return () => listener.unlisten();
}

function parseNotice(payload: string): CatalogNotice | undefined {
  try {
    const value = JSON.parse(payload) as Record<string, unknown>;
    if (typeof value.api === 'string') return { api: value.api };
    if (typeof value.file === 'string') return { file: value.file };
  } catch {
    // not ours: ignored
  }
  return undefined;
}

/** A rollup's stored periods not yet triggered: what a changed definition rebuilds or re-evaluates. */
export async function untriggeredPeriods(sql: Sql, rollupId: string): Promise<number> {
  const [row] = await sql<[{ n: number }]>`
    select count(*)::int as n from periods where rollup_id = ${rollupId} and generation = 0`;
  return row.n;
}
