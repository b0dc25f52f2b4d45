import {
  type PartitionBounds,
  parsePartitionName,
  partitionsToCreate,
} from '../../core/events/partitions.js';
import type { Db, Sql, Tx } from '../pg/db.js';

export interface EventPartition extends PartitionBounds {
  /** A DETACH ... CONCURRENTLY that was interrupted: finalise it, then drop. */
  readonly detaching: boolean;
}

/** The event log's partitions, oldest first. */
export async function listPartitions(db: Db): Promise<EventPartition[]> {
  const rows = await db<{ name: string; detaching: boolean }[]>`
    select c.relname as name, i.inhdetachpending as detaching
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'events'::regclass`;
  return rows
    .flatMap((r) => {
      const bounds = parsePartitionName(r.name);
      return bounds ? [{ ...bounds, detaching: r.detaching }] : [];
    })
    .sort((a, b) => a.hi - b.hi);
}

export function planPartitionsAhead(
  existing: readonly EventPartition[],
  widthSeconds: number,
  aheadSeconds: number,
  now: Date,
): Array<[number, number]> {
  return partitionsToCreate(
    existing.map((p) => p.hi),
    { widthSeconds, aheadSeconds, nowSeconds: Math.floor(now.getTime() / 1000) },
  );
}

/** Creates what `partitionsToCreate` plans; returns the new partitions' names. */
export async function createPartitionsAhead(
  sql: Db,
  widthSeconds: number,
  aheadSeconds: number,
  now: Date,
): Promise<string[]> {
  const plan = planPartitionsAhead(await listPartitions(sql), widthSeconds, aheadSeconds, now);
  const names: string[] = [];
  for (const [lo, hi] of plan) {
    const [row] = await sql<{ name: string }[]>`select create_event_partition(${lo}, ${hi}) as name`;
    names.push(row!.name);
  }
  return names;
}

/**
 * The partition ingest needs now, when none holds the current time (the daemon made none ahead,
 * e.g. a commit from a tool without the daemon): continues the newest partition's width.
 */
export async function createCurrentPartition(sql: Sql, now = new Date()): Promise<void> {
  await sql.begin((tx) => createCurrentPartitionIn(tx, now));
}

/** The same, inside the caller's transaction (the partition commits with it). */
export async function createCurrentPartitionIn(tx: Tx, now = new Date()): Promise<void> {
  const newest = (await listPartitions(tx)).at(-1);
  const width = newest && newest.lo > 0 ? newest.hi - newest.lo : 86_400;
  // Two committers may both find it missing: one creates, the other finds it made.
  await tx`select pg_advisory_xact_lock(hashtext('coverage-rollup.partitions'))`;
  await createPartitionsAhead(tx, width, 0, now);
}

/**
 * Drops a partition without stalling ingest: DETACH ... CONCURRENTLY takes only SHARE UPDATE
 * EXCLUSIVE on the log (inserts take ROW EXCLUSIVE and do not conflict) and waits for the queries
 * that still see the partition; the detached table is then dropped alone. It cannot run inside a
 * transaction, so `sql` must not be one. An interrupted detach is finalised first.
 */
export async function dropPartition(sql: Sql, partition: EventPartition): Promise<void> {
  const attached = await sql<{ detaching: boolean }[]>`
    select i.inhdetachpending as detaching from pg_inherits i
    where i.inhparent = 'events'::regclass and i.inhrelid = to_regclass(${partition.name})`;
  if (attached[0]?.detaching) await sql`alter table events detach partition ${sql(partition.name)} finalize`;
  else if (attached.length > 0)
    await sql`alter table events detach partition ${sql(partition.name)} concurrently`;
  await sql`drop table if exists ${sql(partition.name)}`;
}

export interface LogSize {
  readonly partitions: number;
  readonly bytes: number;
  /**
   * The start of the oldest partition holding a row: the oldest event is at most one partition
   * width younger. (The log has no index on ingest time, so an exact minimum would scan.) For the
   * first partition, which starts at MINVALUE, its rows' minimum.
   */
  readonly oldestFrom: Date | null;
}

export async function logSize(db: Db): Promise<LogSize> {
  const partitions = await listPartitions(db);
  const [row] = await db<{ bytes: number }[]>`
    select coalesce(sum(pg_total_relation_size(i.inhrelid)), 0)::int8 as bytes
    from pg_inherits i where i.inhparent = 'events'::regclass`;
  let oldestFrom: Date | null = null;
  for (const p of partitions) {
    const [first] = await db<{ at: Date }[]>`select ingested_at as at from ${db(p.name)} limit 1`;
    if (!first) continue;
    if (p.lo > 0) oldestFrom = new Date(p.lo * 1000);
    else [{ at: oldestFrom }] = await db<[{ at: Date }]>`select min(ingested_at) as at from ${db(p.name)}`;
    break;
  }
  return { partitions: partitions.length, bytes: row!.bytes, oldestFrom };
}
