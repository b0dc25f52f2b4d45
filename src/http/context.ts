import type { Config } from '../config.js';
import type { Sql } from '../index/db.js';
import type { ReadHandle } from '../index/read-replica.js';
import type { EventQueues } from '../ingest/event-queues.js';
import type { QueueConnection } from '../ingest/queue-backend.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
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
  /** Role and lease facts for /readyz; absent when this instance runs no scheduler. */
  readonly schedulerStatus?: () => Record<string, unknown>;
  /** The read replica's state, for /readyz; absent without database_read_url. */
  readonly replicaStatus?: () => Record<string, unknown>;
  /** The last retention pass, for /readyz. */
  readonly retentionStatus?: () => Record<string, unknown>;
  /** Autovacuum for this database and the daemon's own table maintenance, for /readyz. */
  readonly maintenanceStatus?: () => Record<string, unknown>;
}
