import type { Config } from '../config/index.js';
import type { RollupRuntime } from '../config/rollups.js';
import type { Metrics } from '../metrics/registry.js';
import type { QueueConnection } from '../queue/backend.js';
import type { EventQueues } from '../queue/event-queues.js';
import type { Sql } from '../store/pg/db.js';
import type { ReadHandle } from '../store/pg/read-replica.js';
import type { Logger } from '../support/log.js';
import type { TokenAuth } from './auth.js';

/** What routes may use; every field is owned and closed by the daemon, not by the routes. */
export interface HttpContext {
  readonly config: Config;
  /** The primary: every write, and reads that decide (the lease and the scheduler have their own). */
  readonly sql: Sql;
  /**
   * Where coverage answers, listings and the status page read: the replica while it is healthy and
   * within database_read_max_lag (asOf says how old its data is), else the primary (asOf null).
   */
  readonly read: () => ReadHandle;
  readonly eventsQueue: EventQueues;
  /**
   * Where the queue and the index share one PostgreSQL (queue.backend: postgres): the pool that
   * `POST /v1/events` commits into the index with, without the queue (src/ingest/direct.ts).
   * Absent on Redis, where events are enqueued.
   */
  readonly direct?: Sql;
  /** The queue store (Redis or PostgreSQL), for readiness. */
  readonly queues: QueueConnection;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly auth: TokenAuth;
  /** The clock (epoch ms) every route and the status page read "now" from. */
  readonly now: () => number;
  /** The rollups now (the live catalog): events are checked against the periods they would touch. */
  readonly rollups?: () => readonly RollupRuntime[];
  /** Role and lease facts for /readyz; absent when this instance runs no scheduler. */
  readonly schedulerStatus?: () => Record<string, unknown>;
  /** The read replica's state, for /readyz; absent without database_read_url. */
  readonly replicaStatus?: () => Record<string, unknown>;
  /** The last retention pass, for /readyz. */
  readonly retentionStatus?: () => Record<string, unknown>;
  /** Autovacuum for this database and the daemon's own table maintenance, for /readyz. */
  readonly maintenanceStatus?: () => Record<string, unknown>;
}
