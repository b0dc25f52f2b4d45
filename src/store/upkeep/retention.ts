import { pastRetention } from '../../core/events/partitions.js';
import {
  createPartitionsAhead,
  dropPartition,
  type EventPartition,
  type LogSize,
  listPartitions,
  logSize,
  planPartitionsAhead,
} from '../assets/partitions.js';
import { pruneAudit } from '../audit.js';
import type { Sql } from '../pg/db.js';
import { pruneRepairs, type RepairsPruned } from '../repairs/retention.js';
import { pruneRuns, type RunsPruned } from '../runs/retention.js';

export interface RetentionOptions {
  /** How long the event log is kept, in ms (retention.events). */
  readonly eventsMs: number;
  /**
   * Delivered or failed triggers older than this are compacted, superseded runs that finished
   * before it deleted with their reports, and repair requests decided before it deleted with
   * their waiters and attempts, and audit entries recorded before it deleted; null keeps them whole.
   */
  readonly historyMs: number | null;
  readonly partitionSeconds: number;
  /** How far past now partitions must exist, in seconds. */
  readonly aheadSeconds: number;
  /** Every (rollup, upstream asset) the configuration reads: their cursors hold retention back. */
  readonly readers: ReadonlyArray<{ readonly rollup: string; readonly asset: string }>;
  readonly dryRun?: boolean;
}

/** A cursor that has not passed every event of a partition past retention. */
export interface Hold {
  readonly partition: string;
  readonly rollup: string;
  readonly asset: string;
  readonly cursor: number;
  /** The newest seq of this asset in the partition. */
  readonly newest: number;
}

export interface PruneReport {
  /** False when another instance was pruning: nothing was done. */
  readonly ran: boolean;
  readonly dryRun: boolean;
  readonly created: string[];
  /** With how long the detach and drop took, in ms. */
  readonly dropped: Array<{ readonly partition: string; readonly events: number; readonly ms: number }>;
  readonly held: Hold[];
  readonly triggersCompacted: number;
  /** Superseded runs deleted past history retention, and their reports. */
  readonly runsPruned: RunsPruned;
  /** Decided repair requests deleted past history retention, with their waiters and attempts. */
  readonly repairsPruned: RepairsPruned;
  /** Audit entries deleted past history retention. */
  readonly auditPruned: number;
  readonly size: LogSize;
}

const LOCK = 'coverage-rollup.prune';
const NONE: RunsPruned = { runs: 0, reports: 0 };
const NO_REPAIRS: RepairsPruned = { requests: 0, waiters: 0, attempts: 0 };
/** Triggers compacted per statement, so no update holds many row locks for long. */
const COMPACT_BATCH = 1000;

/**
 * One retention pass, one instance at a time (a session advisory lock, held on a reserved
 * connection while the pass runs on the pool: DETACH ... CONCURRENTLY cannot run inside a
 * transaction, so the pass cannot be one). Makes partitions
 * ahead, drops each partition past retention that every configured reader's cursor has passed,
 * compacts old delivered triggers and deletes old superseded runs, decided repair requests and
 * audit entries. With dryRun, reports what it
 * would do and changes nothing.
 */
export async function prune(sql: Sql, options: RetentionOptions, now = new Date()): Promise<PruneReport> {
  const dryRun = options.dryRun ?? false;
  const ran = await withMaintenanceLock(sql, () => prunePass(sql, options, dryRun, now));
  if (ran !== undefined) return ran;
  return {
    ran: false,
    dryRun,
    created: [],
    dropped: [],
    held: [],
    triggersCompacted: 0,
    runsPruned: NONE,
    repairsPruned: NO_REPAIRS,
    auditPruned: 0,
    size: await logSize(sql),
  };
}

/**
 * Runs `work` while holding the maintenance lock (retention passes, table maintenance), or
 * returns undefined at once when another instance holds it: one instance maintains at a time.
 */
export async function withMaintenanceLock<T>(sql: Sql, work: () => Promise<T>): Promise<T | undefined> {
  const conn = await sql.reserve();
  try {
    const [lock] = await conn<[{ ok: boolean }]>`select pg_try_advisory_lock(hashtext(${LOCK})) as ok`;
    if (!lock.ok) return undefined;
    try {
      return await work();
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${LOCK}))`;
    }
  } finally {
    conn.release();
  }
}

async function prunePass(
  sql: Sql,
  options: RetentionOptions,
  dryRun: boolean,
  now: Date,
): Promise<PruneReport> {
  const nowSeconds = Math.floor(now.getTime() / 1000);
  const created = dryRun
    ? planPartitionsAhead(await listPartitions(sql), options.partitionSeconds, options.aheadSeconds, now).map(
        ([lo, hi]) => `events_p${lo}_${hi}`,
      )
    : await sql.begin(async (tx) => {
        await tx`select pg_advisory_xact_lock(hashtext('coverage-rollup.partitions'))`;
        return createPartitionsAhead(tx, options.partitionSeconds, options.aheadSeconds, now);
      });

  const dropped: PruneReport['dropped'] = [];
  const held: Hold[] = [];
  const old = (await listPartitions(sql)).filter((p) =>
    pastRetention(p, Math.floor(options.eventsMs / 1000), nowSeconds),
  );
  for (const partition of old) {
    const holds = partition.detaching ? [] : await holdsOn(sql, partition, options.readers);
    if (holds.length > 0) {
      held.push(...holds);
      continue;
    }
    const [{ n }] = await sql<[{ n: number }]>`select count(*)::int8 as n from ${sql(partition.name)}`;
    const started = performance.now();
    if (!dryRun) await dropPartition(sql, partition);
    dropped.push({ partition: partition.name, events: n, ms: Math.round(performance.now() - started) });
  }

  const before = options.historyMs === null ? null : new Date(now.getTime() - options.historyMs);
  const triggersCompacted = before === null ? 0 : await compactTriggers(sql, before, dryRun);
  const runsPruned = before === null ? NONE : await pruneRuns(sql, before, dryRun);
  const repairsPruned = before === null ? NO_REPAIRS : await pruneRepairs(sql, before, dryRun);
  const auditPruned = before === null ? 0 : await pruneAudit(sql, before, dryRun);
  return {
    ran: true,
    dryRun,
    created,
    dropped,
    held,
    triggersCompacted,
    runsPruned,
    repairsPruned,
    auditPruned,
    size: await logSize(sql),
  };
}

/**
 * The readers whose cursor has not passed every event of theirs in the partition. A reader with
 * no cursor yet (its scheduler has not run) is at 0 and holds everything of its asset. The seq
 * index keys buckets of 8 (seq >> 3, migration 0013): the bucket condition bounds its scan.
 */
async function holdsOn(
  sql: Sql,
  partition: EventPartition,
  readers: RetentionOptions['readers'],
): Promise<Hold[]> {
  if (readers.length === 0) return [];
  const rows = await sql<{ rollup: string; asset: string; cursor: number; newest: number }[]>`
    select u.rollup, u.asset, coalesce(c.seq, 0) as cursor, max(e.seq) as newest
    from unnest(${readers.map((r) => r.rollup)}::text[], ${readers.map((r) => r.asset)}::text[]) as u(rollup, asset)
    join assets a on a.name = u.asset
    left join rollup_cursors c on c.rollup_id = u.rollup and c.asset_name = u.asset
    join ${sql(partition.name)} e on e.asset_id = a.id
      and e.seq >> 3 >= coalesce(c.seq, 0) >> 3 and e.seq > coalesce(c.seq, 0)
    group by u.rollup, u.asset, c.seq
    order by u.rollup, u.asset`;
  return rows.map((r) => ({ partition: partition.name, ...r }));
}

/**
 * History retention: a delivered (or given-up) trigger older than `before` keeps its row, which
 * is what every answer about its period reads (generation, reason, times, attempts, error), and
 * loses the bulky copies only delivery needed: the payload's per-upstream detail and the target
 * (which may carry headers). Periods are never touched: a period without a row would read as
 * never decided.
 */
async function compactTriggers(sql: Sql, before: Date, dryRun: boolean): Promise<number> {
  if (dryRun) {
    const [{ n }] = await sql<[{ n: number }]>`
      select count(*)::int as n from triggers
      where (delivered_at is not null or failed_at is not null) and decided_at < ${before}
        and payload ? 'upstreams'`;
    return n;
  }
  let total = 0;
  for (;;) {
    const rows = await sql`
      update triggers t set payload = t.payload - 'upstreams', target = jsonb_build_object('type', t.target -> 'type')
      from (
        select rollup_id, period_lo, generation from triggers
        where (delivered_at is not null or failed_at is not null) and decided_at < ${before}
          and payload ? 'upstreams'
        limit ${COMPACT_BATCH}
        for update skip locked
      ) o
      where t.rollup_id = o.rollup_id and t.period_lo = o.period_lo and t.generation = o.generation`;
    total += rows.count;
    if (rows.count < COMPACT_BATCH) return total;
  }
}
