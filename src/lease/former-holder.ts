import { bounded } from '../store/lease.js';
import type { Sql } from '../store/pg/db.js';

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

export interface EndedSessions {
  readonly ended: readonly SessionInfo[];
  /** pg_terminate_backend was refused: another role's session, without pg_signal_backend. */
  readonly refused: readonly SessionInfo[];
  /**
   * The former instance's sessions whose state this role may not see (another role's, without
   * pg_read_all_stats): whether they are stuck cannot be told, so they are left alone.
   */
  readonly hidden?: number;
}

/**
 * Ends the sessions of the instance a new lease holder took the lease from that are stuck in a
 * transaction: waiting on their client (idle in transaction, or mid-statement or mid-pipeline
 * waiting to read from or write to it) or on a lock, in that state for at least `stuckMs`. The
 * former holder stopped renewing a whole TTL ago (partitioned, paused, overloaded), and such a
 * transaction may hold the rows the new holder's passes need (cursors, periods, rollups) with no
 * server timeout to end it: idle_in_transaction_session_timeout applies only after a Sync, and
 * neither it nor statement_timeout while a backend waits for the rest of a pipeline or blocks
 * writing to its client. Terminating rolls back only uncommitted work, all of it redone (marks,
 * ingest from the queue) or fenced (decisions); a session that works (running, not waiting) or
 * changes state quickly, as a healthy instance's does, is left alone.
 */
export async function endFormerHolderSessions(
  sql: Sql,
  instance: string,
  stuckMs: number,
  timeoutMs: number,
): Promise<EndedSessions> {
  const rows = await bounded(
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
  const hidden = rows.filter((r) => r.hidden).length;
  const stuck = rows.filter((r) => !r.hidden).map(({ hidden: _, ...r }) => r);
  return { ...(await terminate(sql, stuck, timeoutMs)), hidden };
}

/** pg_terminate_backend for each, one statement each so that one refusal does not stop the rest. */
export async function terminate(
  sql: Sql,
  sessions: readonly SessionInfo[],
  timeoutMs: number,
): Promise<EndedSessions> {
  const ended: SessionInfo[] = [];
  const refused: SessionInfo[] = [];
  for (const session of sessions) {
    try {
      const [row] = await bounded(
        timeoutMs,
        sql<{ ok: boolean }[]>`select pg_terminate_backend(${session.pid}::int) as ok`,
      );
      if (row?.ok) ended.push(session); // false: the session ended meanwhile
    } catch (error) {
      if ((error as { code?: string }).code !== '42501') throw error;
      refused.push(session);
    }
  }
  return { ended, refused };
}

/** A session as a log field: its age and state rather than the whole row. */
export function describeSession(s: SessionInfo, now = Date.now()) {
  return {
    pid: s.pid,
    application_name: s.application_name,
    state: s.state,
    wait_event: s.wait_event_type === null ? null : `${s.wait_event_type}:${s.wait_event}`,
    query_start: s.query_start?.toISOString() ?? null,
    transaction_ms: s.xact_start ? now - s.xact_start.getTime() : null,
    query: s.query,
  };
}
