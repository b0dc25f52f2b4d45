import type { SessionInfo } from '../store/pg/sessions.js';
import type { LeaseStore } from './store.js';

/** The two session statements ending sessions takes. */
type Sessions = Pick<LeaseStore, 'stuckSessionsOf' | 'terminateSession'>;

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
  sessions: Sessions,
  instance: string,
  stuckMs: number,
  timeoutMs: number,
): Promise<EndedSessions> {
  const rows = await sessions.stuckSessionsOf(instance, stuckMs, timeoutMs);
  const hidden = rows.filter((r) => r.hidden).length;
  const stuck = rows.filter((r) => !r.hidden).map(({ hidden: _, ...r }) => r);
  return { ...(await terminate(sessions, stuck, timeoutMs)), hidden };
}

/** pg_terminate_backend for each, one statement each so that one refusal does not stop the rest. */
export async function terminate(
  store: Pick<Sessions, 'terminateSession'>,
  sessions: readonly SessionInfo[],
  timeoutMs: number,
): Promise<EndedSessions> {
  const ended: SessionInfo[] = [];
  const refused: SessionInfo[] = [];
  for (const session of sessions) {
    try {
      if (await store.terminateSession(session.pid, timeoutMs)) ended.push(session); // false: ended meanwhile
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
