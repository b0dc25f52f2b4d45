/**
 * Other sessions on the index's database, as pg_stat_activity and pg_locks show them: the stuck
 * ones of the instance a lease was taken from, what a scheduler pass waits on, who holds the
 * periods it skipped, and ending a session. Each statement is bounded in time as the lease's are
 * (store/lease.ts bounded): they run when something is already stuck.
 */
import { bounded } from '../lease.js';
import type { Sql } from './db.js';

/**
 * A session of another instance as pg_stat_activity shows it: what a log line names when that
 * session is ended or blocks the lease holder.
 */
export interface SessionInfo {
  readonly pid: number;
  readonly application_name: string;
  readonly state: string | null;
  readonly wait_event_type: string | null;
  readonly wait_event: string | null;
  readonly xact_start: Date | null;
  readonly query_start: Date | null;
  /** The start of the session's current or last statement, at most 200 characters. */
  readonly query: string;
}

/**
 * The sessions of `instance` (the second half of their application_name) in a transaction and
 * waiting on their client or a lock, unchanged for `stuckMs`; and, as `hidden`, those whose state
 * this role may not see (another role's, without pg_read_all_stats).
 */
export async function stuckSessionsOf(
  sql: Sql,
  instance: string,
  stuckMs: number,
  timeoutMs: number,
): Promise<Array<SessionInfo & { hidden: boolean }>> {
  return bounded(
    timeoutMs,
    sql<(SessionInfo & { hidden: boolean })[]>`
      select pid, application_name, state, wait_event_type, wait_event, xact_start, query_start,
        left(query, 200) as query, query = '<insufficient privilege>' as hidden
      from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid()
        and split_part(application_name, '@', 2) = ${instance}
        and (query = '<insufficient privilege>' or (xact_start is not null
          and wait_event_type in ('Client', 'Lock')
          and state_change <= clock_timestamp() - ${stuckMs}::float8 * interval '1 millisecond'))
      order by xact_start`,
  );
}

/**
 * pg_terminate_backend for one session: true when it ended, false when it had ended meanwhile.
 * Throws SQLSTATE 42501 when refused (another role's session, without pg_signal_backend).
 */
export async function terminateSession(sql: Sql, pid: number, timeoutMs: number): Promise<boolean> {
  const [row] = await bounded(
    timeoutMs,
    sql<{ ok: boolean }[]>`select pg_terminate_backend(${pid}::int) as ok`,
  );
  return row?.ok === true;
}

/**
 * Sessions other than `application`'s holding a lock on `periods` in a transaction older than
 * `heldMs`: the likely holders of the periods a pass skipped (pg_locks shows the table, not the row).
 */
export async function periodLockHolders(
  sql: Sql,
  application: string,
  heldMs: number,
  timeoutMs: number,
): Promise<SessionInfo[]> {
  return bounded(
    timeoutMs,
    sql<SessionInfo[]>`
      select distinct on (a.pid) a.pid, a.application_name, a.state, a.wait_event_type,
        a.wait_event, a.xact_start, a.query_start, left(a.query, 200) as query
      from pg_locks l join pg_stat_activity a on a.pid = l.pid
      where l.database = (select oid from pg_database where datname = current_database())
        and l.relation = 'periods'::regclass and l.granted
        and a.pid <> pg_backend_pid() and a.application_name <> ${application}
        and a.xact_start <= clock_timestamp() - ${heldMs}::float8 * interval '1 millisecond'
      order by a.pid`,
  );
}

/** A statement of one pool waiting on a lock, and one session that blocks it. */
export interface LockWait extends SessionInfo {
  readonly waiting_pid: number;
  readonly waiting_query: string;
  readonly waiting_since: Date;
  readonly waiting_ms: number;
}

/** Each statement of `application`'s sessions waiting on a lock, with each session pg_blocking_pids names. */
export async function lockWaits(sql: Sql, application: string, timeoutMs: number): Promise<LockWait[]> {
  return bounded(
    timeoutMs,
    sql<LockWait[]>`
      select w.pid as waiting_pid, left(w.query, 200) as waiting_query,
        w.query_start as waiting_since,
        (extract(epoch from clock_timestamp() - w.state_change) * 1000)::float8 as waiting_ms,
        b.pid, b.application_name, b.state, b.wait_event_type, b.wait_event, b.xact_start,
        b.query_start, left(b.query, 200) as query
      from pg_stat_activity w
      cross join lateral unnest(pg_blocking_pids(w.pid)) as blocker(pid)
      join pg_stat_activity b on b.pid = blocker.pid
      where w.datname = current_database() and w.application_name = ${application}
        and w.wait_event_type = 'Lock'
      order by w.pid, b.pid`,
  );
}
