import type { Config } from '../config.js';
import type { Sql } from '../index/db.js';
import type { EventQueues } from '../ingest/event-queues.js';
import type { RedisClient } from '../ingest/redis.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { TokenAuth } from './auth.js';

/** What routes may use; every field is owned and closed by the daemon, not by the routes. */
export interface HttpContext {
  readonly config: Config;
  readonly sql: Sql;
  readonly eventsQueue: EventQueues;
  readonly redis: RedisClient;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly auth: TokenAuth;
  /** The clock (epoch ms) every route and the status page read "now" from. */
  readonly now: () => number;
  /** Role and lease facts for /readyz; absent when this instance runs no scheduler. */
  readonly schedulerStatus?: () => Record<string, unknown>;
  /** The last retention pass, for /readyz. */
  readonly retentionStatus?: () => Record<string, unknown>;
}
