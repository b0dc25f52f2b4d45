import type { Tx } from './db.js';

/** Longest a scheduler statement may wait for a lock before the pass fails and is retried. */
const LOCK_TIMEOUT_MS = 30_000;

/**
 * Bounds a scheduler transaction in the database itself, so that a holder paused mid-transaction
 * (SIGSTOP, a partition) cannot keep period rows locked for long after its lease lapsed: an idle
 * transaction is ended after `idleMs` (about the lease TTL), a lock wait after 30 s.
 */
export async function limitTransaction(tx: Tx, idleMs: number): Promise<void> {
  await tx`select set_config('lock_timeout', ${`${LOCK_TIMEOUT_MS}ms`}, true),
    set_config('idle_in_transaction_session_timeout', ${`${Math.max(1000, Math.round(idleMs))}ms`}, true)`;
}

/**
 * This transaction's commit does not wait for its WAL flush: for work derived from what is durable
 * already (the marks from the event log), which a crash loses and the next pass redoes.
 */
export async function commitWithoutFlush(tx: Tx): Promise<void> {
  await tx`select set_config('synchronous_commit', 'off', true)`;
}
