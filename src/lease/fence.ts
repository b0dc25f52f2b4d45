import type { Tx } from '../store/pg/db.js';

/** Thrown when a trigger would commit without a current lease: the transaction must roll back. */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
}

/** What the evaluator needs from the scheduler lease; the lease module implements it. */
export interface Fence {
  /** The fencing token while this process believes it leads (local deadline not passed), else null. */
  current(): { readonly token: number; readonly signal: AbortSignal } | null;
  /**
   * Inside a trigger transaction: lock the lease row and check, in database time, that `token`
   * is still the current, unexpired one. Throws LeaseLostError otherwise.
   */
  verify(tx: Tx, token: number): Promise<void>;
}
