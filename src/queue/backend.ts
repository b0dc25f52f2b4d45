/**
 * Every BullMQ queue, worker and queue-events handle of the daemon, the CLI, the queue targets, the
 * benchmarks and the tests comes from here, on the configured backend (`queue.backend`):
 * Redis (redis_url) or BullMQ's own PostgreSQL backend (database_url). Callers name a queue and
 * its prefix and never see which store holds it.
 */

import { userInfo } from 'node:os';
import {
  createPostgresBackend,
  type PostgresPoolConfig,
  type Processor,
  Queue,
  QueueEvents,
  Worker,
  type WorkerOptions,
  withBackend,
} from 'bullmq';
import type { Config, QueueBackendKind } from '../config/index.js';
import { connect, type Sql } from '../store/pg/db.js';
import { sessionName } from '../store/pg/instance.js';
import { type Logger, throttledErrors } from '../support/log.js';
import { connectionErrors, startEventReader } from './pg-connections.js';
import {
  deleteKeysWithPrefix,
  disconnect,
  oneShotConnection,
  type RedisClient,
  redisConnection,
} from './redis.js';
import { queueSchema } from './schema.js';

/** Worker settings a caller may choose; the connection and prefix are the factory's. */
export type WorkerTuning = Omit<WorkerOptions, 'connection' | 'prefix'>;

export interface QueueConnection {
  readonly backend: QueueBackendKind;
  /** A producer, also for reads (getJob, getJobState, getJobCounts). Close it, then the connection. */
  queue<D = unknown>(name: string, prefix: string): Queue<D>;
  worker<D = unknown, R = unknown>(
    name: string,
    prefix: string,
    processor: Processor<D, R>,
    tuning?: WorkerTuning,
  ): Worker<D, R>;
  /**
   * `lastEventId`: where a reader starts in the event stream (default: its end), as a Redis stream
   * id `ms-seq`; on PostgreSQL, after the last event older than `ms`.
   */
  queueEvents(name: string, prefix: string, options?: { lastEventId?: string }): QueueEvents;
  /** Resolves when the store answers now (readiness), rejects with why otherwise. */
  ping(): Promise<void>;
  /** False while the store is known unreachable: a graceful close would wait for it in vain. */
  readonly reachable: boolean;
  /** Removes every queue under a prefix (tests, the demo, benchmarks). */
  deleteNamespace(prefix: string): Promise<void>;
  /** Closes what the connection itself holds (close its queues and workers first). */
  close(): Promise<void>;
}

export interface QueueConnectionOptions {
  /** For one-shot producers (`emit`): an unreachable store fails the command instead of waiting. */
  readonly oneShot?: boolean;
  /**
   * Where the PostgreSQL backend reports a handle's lost connections (one line per handle and
   * outage, pg-queue-connections.ts); unset, they are handled without a word.
   */
  readonly log?: Logger;
}

export type QueueSettings = Pick<Config, 'redis_url' | 'database_url'> & {
  readonly queue: Pick<Config['queue'], 'backend'>;
};

export function queueConnection(
  config: QueueSettings,
  options: QueueConnectionOptions = {},
): QueueConnection {
  if (config.queue.backend !== 'redis') return postgresQueues(config.database_url, options);
  if (options.oneShot) return redisQueues(oneShotConnection(config.redis_url));
  const client = redisConnection(config.redis_url);
  // The shared client's own errors (BullMQ's duplicates have their handlers): without a listener
  // ioredis prints a stack trace for each reconnect attempt while Redis is down.
  const clientError = options.log ? throttledErrors(options.log) : () => {};
  client.on('error', (error: Error) => clientError({ redis: 'queue connection' }, error, 'Redis error'));
  return redisQueues(client);
}

/** One shared ioredis client (BullMQ duplicates it for blocking reads), as before the PostgreSQL backend existed. */
export function redisQueues(client: RedisClient): QueueConnection {
  return {
    backend: 'redis',
    queue: (name, prefix) => new Queue(name, { connection: client, prefix }),
    worker: (name, prefix, processor, tuning = {}) =>
      new Worker(name, processor, { ...tuning, connection: client, prefix }),
    queueEvents: (name, prefix, options = {}) =>
      new QueueEvents(name, { connection: client, prefix, blockingTimeout: 2000, ...options }),
    async ping() {
      // Not connected: say so at once rather than queue a ping that waits for the reconnect.
      if (client.status !== 'ready') throw new Error(`connection ${client.status}`);
      const pong = await client.ping();
      if (pong !== 'PONG') throw new Error(`answered ${pong}`);
    },
    get reachable() {
      return client.status === 'ready';
    },
    deleteNamespace: (prefix) => deleteKeysWithPrefix(client, prefix),
    close: async () => disconnect(client),
  };
}

const pg = withBackend(createPostgresBackend);

/**
 * How long a PostgreSQL QueueEvents reader waits for a NOTIFY before it reads the event table
 * anyway. BullMQ's reader can miss a wake: one sent while it reads (it listens only after an
 * empty read), or one its publisher skipped (one NOTIFY per queue among concurrent commits). The
 * default of 10 s then delays an event by 10 s (seen in bench:trigger, and in 1 of 5 quick adds).
 */
const EVENTS_WAKE_BOUND_MS = 1000;

/**
 * BullMQ's PostgreSQL backend: each queue handle owns a small `pg` pool (and a LISTEN connection
 * for workers and queue events), in the schema its prefix names (queue-schema.ts). BullMQ ignores
 * `prefix` there, so the schema is what keeps queue groups and test namespaces apart. Each handle
 * migrates its schema on first use (BullMQ's migrator, under its advisory lock; a no-op once current).
 * Every handle's `error` events are handled here (a pool's idle connection ended by the server is
 * one): logged once per outage with the handle's role, queue and schema, never a stack on stderr.
 * The pools reconnect on their next query, the LISTEN connection on the next wait (BullMQ, and
 * patches/bullmq+6.7.0.patch for a handle whose first connect failed).
 */
function postgresQueues(url: string, options: QueueConnectionOptions): QueueConnection {
  let admin: Sql | undefined; // for ping, deleteNamespace and reader cursors, opened on first use
  const adminSql = () => {
    admin ??= connect(url, { max: 1, applicationName: 'coverage-rollup-queue-admin', connectTimeout: 5 });
    return admin;
  };
  const errors = connectionErrors(options.log);
  const pool = (prefix: string, max: number, asyncCommit = false): PostgresPoolConfig => ({
    connectionString: withDefaultUser(url),
    // A worker's transitions (claim, complete, fail) need not wait for the WAL flush: one lost to
    // a server crash returns its job to the queue, and redelivery is harmless (ingest and queue
    // targets are idempotent). Producers keep synchronous commit: an acknowledged add is durable.
    ...(asyncCommit ? { options: '-c synchronous_commit=off' } : {}),
    schema: queueSchema(prefix),
    migrate: true,
    max,
    application_name: sessionName('coverage-rollup-queue'),
    ...(options.oneShot ? { connectionTimeoutMillis: 5_000 } : {}),
  });
  return {
    backend: 'postgres',
    queue: <D>(name: string, prefix: string) => {
      const queue = new pg.Queue<D>(name, { connection: pool(prefix, 2) }) as unknown as Queue<D>;
      errors.watch(queue, { role: 'producer', queue: name, schema: queueSchema(prefix) });
      return queue;
    },
    worker: <D, R>(name: string, prefix: string, processor: Processor<D, R>, tuning: WorkerTuning = {}) => {
      // The pool serves fetches, completions and lock renewals of `concurrency` jobs at once. Sizes
      // stay small: a daemon holds several handles, and a shared server's max_connections is 100.
      const worker = new pg.Worker<D, R>(name, processor as never, {
        ...tuning,
        connection: pool(prefix, 8, true),
      }) as unknown as Worker<D, R>;
      errors.watch(worker, { role: 'worker', queue: name, schema: queueSchema(prefix) });
      return worker;
    },
    queueEvents: (name, prefix, options = {}) => {
      const schema = queueSchema(prefix);
      const events = new pg.QueueEvents(name, {
        connection: pool(prefix, 1),
        blockingTimeout: EVENTS_WAKE_BOUND_MS,
        autorun: false,
      }) as unknown as QueueEvents;
      errors.watch(events, { role: 'events', queue: name, schema });
      // Event ids here are a sequence, not Redis' `ms-seq` stream ids: a reader asked to start at a
      // time starts after the last event older than it (pg-queue-connections.ts).
      const since = options.lastEventId ? Number.parseInt(options.lastEventId, 10) : Number.NaN;
      startEventReader(
        events,
        Number.isFinite(since) ? () => lastEventBefore(adminSql(), schema, name, since) : undefined,
      );
      return events;
    },
    async ping() {
      await adminSql()`select 1`;
    },
    reachable: true,
    async deleteNamespace(prefix) {
      await adminSql()`drop schema if exists ${adminSql()(queueSchema(prefix))} cascade`;
    },
    async close() {
      await admin?.end({ timeout: 2 });
    },
  };
}

/**
 * The id of the queue's last event before `ms` (epoch ms), or '0' when there is none: also before
 * BullMQ made the event table, as every event is then newer than `ms`.
 */
async function lastEventBefore(sql: Sql, schema: string, queue: string, ms: number): Promise<string> {
  const [exists] = await sql<{ found: boolean }[]>`
    select to_regclass(quote_ident(${schema}) || '.event') is not null as found`;
  if (!exists?.found) return '0';
  const [row] = await sql<{ id: number }[]>`
    select id from ${sql(schema)}.event where queue = ${queue} and created_at_ms < ${ms}
    order by id desc limit 1`;
  return String(row?.id ?? 0);
}

/**
 * libpq and postgres.js default the user to the OS user; node-postgres reads only $USER (unset
 * under systemd or a bare `env -i`), and a user option loses to the URL's empty one.
 */
function withDefaultUser(url: string): string {
  const parsed = new URL(url);
  if (parsed.username) return url;
  parsed.username = encodeURIComponent(process.env.PGUSER ?? userInfo().username);
  return parsed.toString();
}
