/**
 * The daemon's own table maintenance: where autovacuum does not run (off for the
 * database, as on this project's machines, or for a table), the daemon analyzes its tables after
 * large changes, so plans follow the data, and vacuums them after many dead rows, so updated and
 * deleted rows leave space that is used again instead of growing the files. It counts changes as
 * autovacuum does (pg_stat_user_tables) and with autovacuum's default thresholds. On the PostgreSQL
 * queue backend the same goes for the tables of the queue schemas it consumes: BullMQ inserts,
 * updates and deletes a `job` row per event, and trims its `event` table.
 */
import type { Sql } from '../pg/db.js';

/** Autovacuum's defaults: a table is analyzed after 50 + 10 % changed rows, vacuumed after 50 + 20 % dead. */
const ANALYZE_BASE = 50;
const ANALYZE_SCALE = 0.1;
const VACUUM_BASE = 50;
const VACUUM_SCALE = 0.2;

export interface AutovacuumState {
  /** current_setting('autovacuum'): the launcher runs at all. */
  readonly database: boolean;
  /**
   * The daemon's tables with autovacuum_enabled = false in their storage parameters, and those of
   * the queue schemas it consumes (named `schema.table`).
   */
  readonly tablesOff: readonly string[];
}

/** Whether autovacuum looks after this database and which of its tables (and queue tables) it skips. */
export async function autovacuumState(
  sql: Sql,
  queueSchemas: readonly string[] = [],
): Promise<AutovacuumState> {
  const [row] = await sql<[{ on: boolean; off: string[] }]>`
    select current_setting('autovacuum')::bool as on,
      coalesce(array_agg(
        case when n.nspname = current_schema() then c.relname::text else n.nspname || '.' || c.relname end
        order by n.nspname <> current_schema(), n.nspname, c.relname
      ) filter (where exists (
        select from unnest(c.reloptions) o where o ~* '^autovacuum_enabled=(false|off|no|0)$'
      )), '{}') as off
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where (n.nspname = current_schema() or n.nspname = any(${sql.array([...queueSchemas])}))
      and c.relkind = 'r'`;
  return { database: row.on, tablesOff: row.off };
}

export interface TableWork {
  readonly schema: string;
  readonly table: string;
  readonly analyze: boolean;
  readonly vacuum: boolean;
  /** Rows changed since the last analyze, and dead rows, when it was decided. */
  readonly changed: number;
  readonly dead: number;
}

/**
 * The tables of the current schema and of `queueSchemas` that autovacuum leaves alone and that
 * changed enough to need it: each with what it needs. One read of the statistics views, whatever
 * the number of tables. A queue schema BullMQ has not created yet simply has no tables here.
 */
export async function tablesNeedingWork(
  sql: Sql,
  queueSchemas: readonly string[] = [],
): Promise<TableWork[]> {
  const rows = await sql<{ schema: string; table: string; changed: number; dead: number; live: number }[]>`
    select s.schemaname::text as schema, s.relname::text as table, s.n_mod_since_analyze as changed,
      s.n_dead_tup as dead, greatest(c.reltuples, s.n_live_tup, 0)::float8 as live
    from pg_stat_user_tables s join pg_class c on c.oid = s.relid
    where (s.schemaname = current_schema() or s.schemaname = any(${sql.array([...queueSchemas])}))
      and c.relkind = 'r'
      and not (current_setting('autovacuum')::bool and not exists (
        select from unnest(c.reloptions) o where o ~* '^autovacuum_enabled=(false|off|no|0)$'))`;
  return rows
    .map((r) => ({
      schema: r.schema,
      table: r.table,
      analyze: r.changed > ANALYZE_BASE + ANALYZE_SCALE * r.live,
      vacuum: r.dead > VACUUM_BASE + VACUUM_SCALE * r.live,
      changed: Number(r.changed),
      dead: Number(r.dead),
    }))
    .filter((w) => w.analyze || w.vacuum)
    .sort((a, b) => a.schema.localeCompare(b.schema) || a.table.localeCompare(b.table));
}

/**
 * Analyzes or vacuums (with analyze) each table that needs it, one at a time. VACUUM cannot run
 * in a transaction, so each is a statement of its own on the pool; neither blocks reads or writes.
 */
export async function maintainTables(sql: Sql, queueSchemas: readonly string[]): Promise<TableWork[]> {
  const work = await tablesNeedingWork(sql, queueSchemas);
  for (const w of work) {
    if (w.vacuum) await sql`vacuum (analyze) ${sql(w.schema)}.${sql(w.table)}`;
    else await sql`analyze ${sql(w.schema)}.${sql(w.table)}`;
  }
  return work;
}
