import { Counter, collectDefaultMetrics, Gauge, Histogram } from 'prom-client';
import { LeanRegistry, SnapshotGauge } from './lean-registry.js';
import { createLeaseSessionMetrics } from './lease.js';
import { createRepairMetrics } from './repairs.js';
import { createRunMetrics } from './runs.js';

/** Every metric the daemon exports, on a registry of its own (one per daemon instance). */
/** Fills the period gauges when /metrics is scraped (they are derived, not kept up to date). */
export interface PeriodGaugeSource {
  periods(gauge: SnapshotGauge<'rollup' | 'state'>): Promise<void>;
  pastDeadline(gauge: Gauge<'rollup'>): Promise<void>;
}

export function createMetrics() {
  let periodSource: PeriodGaugeSource | undefined;
  const registry = new LeanRegistry();
  collectDefaultMetrics({ register: registry });
  // prom-client names three gauges *_total (a counter's suffix), which `promtool check metrics`
  // refuses; it has no option to rename them, so they are dropped (docs/operations.md "Metrics").
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
  const registers = [registry];
  return {
    registry,
    eventsIngested: new Counter({
      name: 'coverage_rollup_events_ingested_total',
      help: 'Events taken from the queue and committed to the index, by status (committed or duplicate)',
      labelNames: ['status'] as const,
      registers,
    }),
    eventsRejected: new Counter({
      name: 'coverage_rollup_events_rejected_total',
      help: 'Events refused as bad input (dead-lettered or answered 400), by reason',
      labelNames: ['reason'] as const,
      registers,
    }),
    batchSize: new Histogram({
      name: 'coverage_rollup_commit_batch_size',
      help: 'Events per group-commit transaction',
      buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500],
      registers,
    }),
    commitSeconds: new Histogram({
      name: 'coverage_rollup_commit_seconds',
      help: 'Duration of one group-commit transaction',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    commitRetries: new Counter({
      name: 'coverage_rollup_commit_retries_total',
      help: 'Group commits retried after a transient PostgreSQL failure',
      registers,
    }),
    ingestPausedForPostgres: new Gauge({
      name: 'coverage_rollup_ingest_paused_for_postgres',
      help: '1 while ingest is paused because PostgreSQL does not answer (queue.pg_stall_timeout), else 0',
      registers,
    }),
    jobsReturned: new Counter({
      name: 'coverage_rollup_ingest_jobs_returned_total',
      help: 'Event jobs given back to the queue, uncommitted, for another instance (not counted as attempts)',
      registers,
    }),
    coverageWaiters: new Gauge({
      name: 'coverage_rollup_coverage_waiters',
      help: 'Coverage requests held open by wait= on this instance (at most http.max_waiters)',
      registers,
    }),
    coverageWaits: new Counter({
      name: 'coverage_rollup_coverage_waits_total',
      help: 'Coverage requests that waited, by how the wait ended (covered, timeout, aborted, closing) or refused over http.max_waiters',
      labelNames: ['outcome'] as const,
      registers,
    }),
    queueDepth: new Gauge({
      name: 'coverage_rollup_queue_depth',
      help: 'Jobs in the events queue, by state',
      labelNames: ['state'] as const,
      registers,
    }),
    periods: new SnapshotGauge({
      name: 'coverage_rollup_periods',
      help: 'Periods from begin up to now, stored or derived, by rollup and state',
      labelNames: ['rollup', 'state'] as const,
      registers,
      async collect() {
        // prom-client types `this` as a plain Gauge; it is this SnapshotGauge.
        await periodSource?.periods(this as SnapshotGauge<'rollup' | 'state'>);
      },
    }),
    periodsPastDeadline: new Gauge({
      name: 'coverage_rollup_periods_past_deadline',
      help: 'Periods whose deadline has passed that are still waiting or settling (no trigger or miss decided yet), by rollup with a deadline',
      labelNames: ['rollup'] as const,
      registers,
      async collect() {
        await periodSource?.pastDeadline(this);
      },
    }),
    setPeriodSource(source: PeriodGaugeSource) {
      periodSource = source;
    },
    triggers: new Counter({
      name: 'coverage_rollup_triggers_total',
      help: 'Trigger decisions committed, by rollup, reason and target type',
      labelNames: ['rollup', 'reason', 'target'] as const,
      registers,
    }),
    // A histogram, not a summary: quantiles of summaries cannot be aggregated across instances.
    schedulerPassSeconds: new Histogram({
      name: 'coverage_rollup_scheduler_pass_seconds',
      help: 'Duration of one scheduler pass, by whether it had work (marks, decisions, deadlines) or was idle',
      labelNames: ['work'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    schedulerStepFailures: new Counter({
      name: 'coverage_rollup_scheduler_step_failures_total',
      help: 'Steps of a scheduler pass that failed, by step: the pass ran its other steps, and the step is tried again at the next pass (after a backoff)',
      labelNames: ['step'] as const,
      registers,
    }),
    periodsMissed: new Counter({
      name: 'coverage_rollup_periods_missed_total',
      help: 'Periods that missed their deadline while this instance led',
      labelNames: ['rollup'] as const,
      registers,
    }),
    decisionSeconds: new Histogram({
      name: 'coverage_rollup_decision_latency_seconds',
      help: 'From the newest event a decision saw being ingested to the decision committing (decisions on periods with no event since start-up, e.g. seeded from the index, and manual ones are left out)',
      // Sub-second for immediate decisions, then settle (seconds to minutes) and deadline (hours)
      // waits, up to a day: a decision held by a PT30S settle or a PT6H deadline gets a bucket.
      buckets: [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200,
        14400, 21600, 43200, 86400,
      ],
      registers,
    }),
    deliveries: new Counter({
      name: 'coverage_rollup_deliveries_total',
      help: 'Trigger delivery attempts, by target type and result (delivered, retry, failed)',
      labelNames: ['target', 'result'] as const,
      registers,
    }),
    leaseLeader: new Gauge({
      name: 'coverage_rollup_lease_leader',
      help: '1 while this instance holds the scheduler lease, else 0',
      registers,
    }),
    leaseToken: new Gauge({
      name: 'coverage_rollup_lease_token',
      help: 'Fencing token of the held lease',
      registers,
    }),
    leaseExpirySeconds: new Gauge({
      name: 'coverage_rollup_lease_expiry_seconds',
      help: 'Seconds until the held lease lapses unless renewed',
      registers,
    }),
    leaseRenewals: new Counter({
      name: 'coverage_rollup_lease_renewals_total',
      help: 'Lease renewals, by result (ok or failed)',
      labelNames: ['result'] as const,
      registers,
    }),
    assetLag: new Gauge({
      name: 'coverage_rollup_asset_lag_seconds',
      help: "Seconds from the end of a time asset's newest complete coverage to now (read at scrape time)",
      labelNames: ['asset'] as const,
      registers,
    }),
    assetStale: new Gauge({
      name: 'coverage_rollup_asset_stale',
      help: '1 when an asset with freshness.max_lag lags more than that (integer assets: no event within it), else 0',
      labelNames: ['asset'] as const,
      registers,
    }),
    leaseLosses: new Counter({
      name: 'coverage_rollup_lease_losses_total',
      help: 'Times this instance stepped down from the lease',
      registers,
    }),
    eventLogBytes: new Gauge({
      name: 'coverage_rollup_event_log_bytes',
      help: 'Size of the event log on disk (every partition, with indexes), as of the last retention pass',
      registers,
    }),
    eventLogPartitions: new Gauge({
      name: 'coverage_rollup_event_log_partitions',
      help: 'Partitions of the event log, as of the last retention pass',
      registers,
    }),
    eventLogOldestSeconds: new Gauge({
      name: 'coverage_rollup_event_log_oldest_seconds',
      help: 'Age of the oldest partition holding events (the oldest event is at most one partition width younger)',
      registers,
    }),
    retentionHeld: new Gauge({
      name: 'coverage_rollup_retention_held_partitions',
      help: 'Partitions past retention kept because a scheduler cursor has not passed their events',
      registers,
    }),
    pruned: new Counter({
      name: 'coverage_rollup_pruned_total',
      help: 'What retention removed: partitions and the events in them, compacted triggers, superseded runs and their reports, decided repair requests, audit entries',
      labelNames: ['what'] as const,
      registers,
    }),
    // Registered by useReplicaGauges only: without a replica, a lag of 0 would be a false reading.
    replicaLagSeconds: new Gauge({
      name: 'coverage_rollup_replica_lag_seconds',
      help: 'How far the read replica is behind the primary (now minus as_of, measured every 250 ms; a lower bound when the replica is behind every kept sample)',
      registers: [],
    }),
    replicaServingReads: new Gauge({
      name: 'coverage_rollup_replica_serving_reads',
      help: '1 while the read replica serves coverage answers and listings, 0 while they go to the primary',
      registers: [],
    }),
    useReplicaGauges() {
      registry.registerMetric(this.replicaLagSeconds);
      registry.registerMetric(this.replicaServingReads);
    },
    ...createRunMetrics(registry),
    ...createRepairMetrics(registry),
    ...createLeaseSessionMetrics(registry),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The steps of a scheduler pass (scheduler/scheduler.ts), each run whether another failed. */
export const SCHEDULER_STEPS = [
  'mark',
  'evaluate',
  'deadlines',
  'deliver',
  'repairs',
  'runs',
  'wake',
] as const;
export type SchedulerStep = (typeof SCHEDULER_STEPS)[number];

/** prom-client default gauges whose names end in _total (see createMetrics). */
export const MISNAMED_DEFAULTS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
] as const;
