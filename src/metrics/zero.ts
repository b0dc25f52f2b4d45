/**
 * Every closed label set of a counter starts at 0 at start-up, so `increase()` and `rate()` see
 * the first event (a series born at 1 has no earlier sample to count it from) and alert rules see
 * a series to compare against before anything happened.
 */
import type { RollupConfig } from '../config/index.js';
import { BAD_INPUT_REASONS } from '../core/errors.js';
import type { TriggerReason } from '../core/periods/policy.js';
import { type Metrics, SCHEDULER_STEPS } from './registry.js';

const TRIGGER_REASONS: readonly TriggerReason[] = [
  'covered',
  'ratio',
  'deadline',
  'replay',
  'update',
  'manual',
];
const DELIVERY_RESULTS = ['delivered', 'retry', 'failed'] as const;

/** `rollups`: the configured ones (their ids and target types are the open labels made closed). */
export function startCountersAtZero(metrics: Metrics, rollups: readonly RollupConfig[]): void {
  for (const reason of BAD_INPUT_REASONS) metrics.eventsRejected.inc({ reason }, 0);
  for (const status of ['committed', 'duplicate'] as const) metrics.eventsIngested.inc({ status }, 0);
  for (const result of ['ok', 'failed'] as const) metrics.leaseRenewals.inc({ result }, 0);
  for (const what of [
    'partitions',
    'events',
    'triggers',
    'runs',
    'run_reports',
    'repair_requests',
    'audit_entries',
  ] as const)
    metrics.pruned.inc({ what }, 0);
  for (const work of ['idle', 'busy'] as const) metrics.schedulerPassSeconds.zero({ work });
  for (const step of SCHEDULER_STEPS) metrics.schedulerStepFailures.inc({ step }, 0);
  for (const target of new Set(rollups.map((r) => r.target.type)))
    for (const result of DELIVERY_RESULTS) metrics.deliveries.inc({ target, result }, 0);
  for (const rollup of rollups) {
    metrics.periodsMissed.inc({ rollup: rollup.id }, 0);
    for (const reason of TRIGGER_REASONS)
      metrics.triggers.inc({ rollup: rollup.id, reason, target: rollup.target.type }, 0);
  }
}
