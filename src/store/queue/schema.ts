/** A queue prefix's schema on BullMQ's PostgreSQL backend: dropping it, and reading its event table. */
import type { Sql } from '../pg/db.js';

/** Removes every queue under a prefix: its schema, with BullMQ's tables and functions in it. */
export async function dropQueueSchema(sql: Sql, schema: string): Promise<void> {
  await sql`drop schema if exists ${sql(schema)} cascade`;
}

/**
 * The id of the queue's last event before `ms` (epoch ms), or '0' when there is none: also before
 * BullMQ made the event table, as every event is then newer than `ms`.
 */
export async function lastEventBefore(sql: Sql, schema: string, queue: string, ms: number): Promise<string> {
  const [exists] = await sql<{ found: boolean }[]>`
    select to_regclass(quote_ident(${schema}) || '.event') is not null as found`;
  if (!exists?.found) return '0';
  const [row] = await sql<{ id: number }[]>`
    select id from ${sql(schema)}.event where queue = ${queue} and created_at_ms < ${ms}
    order by id desc limit 1`;
  return String(row?.id ?? 0);
}
