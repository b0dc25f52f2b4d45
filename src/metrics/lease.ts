import { Counter, Gauge, type Registry } from 'prom-client';

/** Who holds the lock a lease holder's pass waits on (src/scheduler/lock-watch.ts). */
export const LOCK_BLOCKERS = ['former_holder', 'other_instance', 'this_instance', 'other_client'] as const;
export type LockBlocker = (typeof LOCK_BLOCKERS)[number];

/**
 * What a lease holder's passes wait on, and the former holder's sessions it ended after a
 * takeover (docs/reliability.md "A new leader and the old leader's sessions"). Every closed
 * label set starts at 0.
 */
export function createLeaseSessionMetrics(registry: Registry) {
  const registers = [registry];
  const metrics = {
    schedulerLockWaitSeconds: new Gauge({
      name: 'coverage_rollup_scheduler_lock_wait_seconds',
      help: "How long the lease holder's running pass has waited on a lock, as of the last look (0 while none waits)",
      registers,
    }),
    schedulerLockWaits: new Counter({
      name: 'coverage_rollup_scheduler_lock_waits_total',
      help: 'Locks of other sessions a lease holder pass met, each waiting statement and blocking session once (wait=blocked) or each session holding locks on periods a pass skipped (wait=skipped), by who holds them: former_holder, other_instance, this_instance, other_client',
      labelNames: ['blocker', 'wait'] as const,
      registers,
    }),
    formerHolderSessionsEnded: new Counter({
      name: 'coverage_rollup_lease_former_holder_sessions_ended_total',
      help: 'Sessions of the instance the lease was taken from, stuck in a transaction, that this instance ended (ended) or was not allowed to end (refused)',
      labelNames: ['result'] as const,
      registers,
    }),
  };
  for (const blocker of LOCK_BLOCKERS)
    for (const wait of ['blocked', 'skipped'] as const) metrics.schedulerLockWaits.inc({ blocker, wait }, 0);
  for (const result of ['ended', 'refused'] as const) metrics.formerHolderSessionsEnded.inc({ result }, 0);
  return metrics;
}

export type LeaseSessionMetrics = ReturnType<typeof createLeaseSessionMetrics>;
