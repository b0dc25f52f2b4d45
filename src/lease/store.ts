/**
 * What the lease asks of its database, and nothing more: one statement each, every one bounded
 * in time by the caller's `timeoutMs`. SchedulerLease takes a LeaseStore, as BullMQ's lock
 * manager takes the commands it needs, so its state machine runs against a model in the unit
 * tests; postgresLeaseStore is the real one, over the statements of store/lease.ts and
 * store/pg/sessions.ts.
 */
import {
  acquireLease,
  bounded,
  checkLease,
  endExpiredHolderSessions,
  releaseLease,
  renewLease,
} from '../store/lease.js';
import type { Sql, Tx } from '../store/pg/db.js';
import { type SessionInfo, stuckSessionsOf, terminateSession } from '../store/pg/sessions.js';

export interface LeaseStore {
  /**
   * Takes the lease when it is free, expired or already this holder's, with a new token; returns
   * it and the holder named before (null for a new lease), or null while another's lease is live.
   */
  acquire(
    name: string,
    holder: string,
    ttlMs: number,
    timeoutMs: number,
  ): Promise<{ token: number; previous: string | null } | null>;
  /** Extends this holder's live lease under `token`; false when it is gone or expired. */
  renew(name: string, holder: string, token: number, ttlMs: number, timeoutMs: number): Promise<boolean>;
  /** Ends this holder's live lease now; false when there was none to end. */
  release(name: string, holder: string, token: number, timeoutMs: number): Promise<boolean>;
  /**
   * Inside the caller's transaction: true while `token` is the current, unexpired one, in
   * database time, holding the lease against a takeover until that transaction ends.
   */
  check(tx: Tx, name: string, token: number): Promise<boolean>;
  /** Ends the sessions that hold an expired lease's row (they block every takeover); how many. */
  endExpiredHolderSessions(name: string): Promise<number>;
  /** An instance's sessions stuck in a transaction for `stuckMs`, and (hidden) those this role cannot see. */
  stuckSessionsOf(
    instance: string,
    stuckMs: number,
    timeoutMs: number,
  ): Promise<Array<SessionInfo & { hidden: boolean }>>;
  /** Ends a session: false when it had ended; throws SQLSTATE 42501 when this role may not. */
  terminateSession(pid: number, timeoutMs: number): Promise<boolean>;
}

/** The lease's store in PostgreSQL, on `sql` (best a small pool of its own). */
export function postgresLeaseStore(sql: Sql): LeaseStore {
  return {
    async acquire(name, holder, ttlMs, timeoutMs) {
      const [row] = await bounded(timeoutMs, acquireLease(sql, name, holder, ttlMs));
      return row ?? null;
    },
    async renew(name, holder, token, ttlMs, timeoutMs) {
      return (await bounded(timeoutMs, renewLease(sql, name, holder, token, ttlMs))).length === 1;
    },
    async release(name, holder, token, timeoutMs) {
      return (await bounded(timeoutMs, releaseLease(sql, name, holder, token))).length > 0;
    },
    check: checkLease,
    endExpiredHolderSessions: (name) => endExpiredHolderSessions(sql, name),
    stuckSessionsOf: (instance, stuckMs, timeoutMs) => stuckSessionsOf(sql, instance, stuckMs, timeoutMs),
    terminateSession: (pid, timeoutMs) => terminateSession(sql, pid, timeoutMs),
  };
}
