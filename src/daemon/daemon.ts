import type { FastifyInstance } from 'fastify';
import type { Config, ConfigSource } from '../config/index.js';
import { defineRollups, type RollupRuntime } from '../config/rollups.js';
import { checkSecretEnv } from '../config/secret-env.js';
import { resolveTokens } from '../config/tokens.js';
import { isClusterUrl } from '../core/connections/redis-url.js';
import { TokenAuth } from '../http/auth.js';
import { registerCatalogRoutes } from '../http/routes/catalog.js';
import { registerGraphRoute } from '../http/routes/graph.js';
import { registerRepairRequest } from '../http/routes/repair-request.js';
import { registerRollupRoutes } from '../http/routes/rollups.js';
import { registerStatusPage } from '../http/routes/status-page.js';
import { buildServer } from '../http/server.js';
import { commitsDirectly } from '../ingest/direct.js';
import { connectIngest, type IngestWorker, startIngestWorker } from '../ingest/worker.js';
import type { EndedSessions } from '../lease/former-holder.js';
import { SchedulerLease } from '../lease/lease.js';
import { postgresLeaseStore } from '../lease/store.js';
import { boundedScrape } from '../metrics/bounded-scrape.js';
import { periodGaugeSource } from '../metrics/period-gauges.js';
import { createMetrics, type Metrics } from '../metrics/registry.js';
import { openRunGaugeSource } from '../metrics/run-gauges.js';
import { startCountersAtZero } from '../metrics/zero.js';
import { queueConnection } from '../queue/backend.js';
import { EventQueues } from '../queue/event-queues.js';
import { disconnect, redisConnection, warnUnlessNoEviction } from '../queue/redis.js';
import { consumedQueueSchemas } from '../queue/schema.js';
import { LockWatch } from '../scheduler/lock-watch.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { type DeclaredAsset, registerDeclaredAssets } from '../store/assets/assets.js';
import { connect, ensureDatabase, type Sql } from '../store/pg/db.js';
import { INSTANCE_ID, SESSION_PREFIX, sessionName } from '../store/pg/instance.js';
import { type ReadHandle, ReadReplica } from '../store/pg/read-replica.js';
import { countRepairs } from '../store/repairs/listings.js';
import { latestVersion, migrate } from '../store/upkeep/migrate.js';
import { type Logger, redactUrl } from '../support/log.js';
import { whileSlow } from '../support/slow-step.js';
import { explainListenError } from './listen-error.js';
import { LiveCatalog } from './live-catalog.js';
import { MAINTENANCE_EVERY_MS, MaintenanceLoop } from './maintenance-loop.js';
import { RetentionLoop } from './retention-loop.js';
import { closeAll, shutdownBudget, within } from './shutdown.js';

/** Direct commits of POST /v1/events at once; more requests wait for a connection. */
const DIRECT_COMMIT_CONNECTIONS = 4;

export interface Daemon {
  readonly sql: Sql;
  readonly metrics: Metrics;
  readonly http: FastifyInstance;
  /** The bound HTTP address, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** The scheduler when this instance schedules (its `pass` and `decided` events), else undefined. */
  readonly scheduler: Scheduler | undefined;
  /**
   * Stops taking work, drains in-flight work and releases the lease within shutdown_timeout (one
   * budget: the scheduler's share, then ingest's, see shutdownBudget), then closes.
   */
  stop(): Promise<void>;
}

export interface DaemonOptions {
  /** A token the API accepts for everything, for this machine's commands (`start` records it). */
  readonly localToken?: string;
  /** The config file `reload` reads again (`start`'s --config); without it there is nothing to reload. */
  readonly configFile?: ConfigSource;
}

/** Starts every part of one instance: migrations, ingest, HTTP and (when configured) the scheduler. */
export async function startDaemon(
  config: Config,
  log: Logger,
  /** Already built from this config (`start` builds them before anything starts); the catalog checks them again with the API's. */
  _rollups: RollupRuntime[] = defineRollups(config),
  options: DaemonOptions = {},
): Promise<Daemon> {
  log.info(
    {
      database: redactUrl(config.database_url),
      ...(config.database_read_url ? { read_replica: redactUrl(config.database_read_url) } : {}),
      queue_backend: config.queue.backend,
      ...(config.queue.backend === 'redis'
        ? { redis: redactUrl(config.redis_url), redis_cluster: isClusterUrl(config.redis_url) }
        : {}),
      queue: config.queue.name,
      queue_groups: config.queue.groups,
      consumed_groups: config.queue.consume ?? 'all',
    },
    'starting coverage-rollup',
  );
  if (config.scheduler.enabled) checkSecretEnv(config, process.env);
  const scoped = resolveTokens(config, process.env);
  // Names and scopes only: the tokens themselves are never logged.
  if (scoped.length > 0)
    log.info({ tokens: scoped.map((t) => ({ name: t.name, scopes: [...t.grant.scopes] })) }, 'scoped tokens');
  await whileSlow(log, 'reaching the database', ensureDatabase(config.database_url, log));
  // Every pool gives up a stale flow within queue.pg_stall_timeout (src/store/pg/stale-connections.ts).
  const stale = { staleAfterMs: config.queue.pg_stall_timeout, log: log.child({ component: 'postgres' }) };
  const sql = connect(config.database_url, { max: 20, ...stale });
  const closers: Array<() => Promise<void>> = [() => sql.end({ timeout: 5 })];
  const budget = shutdownBudget(config.shutdown_timeout);
  try {
    // Each step that can be slow (a lock held by another starter, a loaded machine) says so every
    // 10 s while it runs (support/slow-step.ts): a start never waits in silence.
    const applied = await whileSlow(log, 'migrating the database schema', migrate(sql, log));
    log.info({ applied: applied.length, version: latestVersion() }, 'database schema up to date');
    const metrics = createMetrics();
    // The file's rollups and the API's; reload, PUT and DELETE change it while the daemon runs.
    const catalog = await LiveCatalog.open({
      sql,
      log: log.child({ component: 'catalog' }),
      metrics,
      file: options.configFile,
      config,
      origin: options.configFile?.path ?? 'config',
      schedules: config.scheduler.enabled,
    });
    closers.unshift(() => catalog.close()); // before the pool it listens on ends
    const rollups = () => catalog.current().rollups;
    for (const { declared, recorded } of await registerDeclaredAssets(
      sql,
      declaredAssets(config, rollups()),
    )) {
      log.warn(
        { asset: declared.name, declared: { domain: declared.domain, zone: declared.zone }, recorded },
        'config declares this asset unlike the index recorded it at first sight; the recorded domain stands, and events with the other are dead-lettered',
      );
    }
    startCountersAtZero(
      metrics,
      rollups().map((r) => r.config),
    );
    // The new and changed rollups' counters (a thousand unchanged ones are not gone through again).
    catalog.onChange((next, previous) =>
      startCountersAtZero(
        metrics,
        next.rollups.filter((r) => previous.get(r.rollup.id) !== r).map((r) => r.config),
      ),
    );
    metrics.setPeriodSource(periodGaugeSource(sql, rollups, log));
    metrics.setOpenRunSource(openRunGaugeSource(sql, log));
    metrics.setRepairSource({ counts: boundedScrape(() => countRepairs(sql), log, 'repair gauges') });
    const queues = queueConnection(config, { log });
    closers.unshift(() => queues.close());
    if (config.queue.backend === 'redis') {
      // Not awaited: a Redis still coming up must not hold the start; the warning follows when it answers.
      const redis = redisConnection(config.redis_url);
      redis.on('error', () => {}); // the queue connection's own errors say it (queue/backend.ts)
      closers.unshift(async () => disconnect(redis));
      void warnUnlessNoEviction(redis, log).finally(() => disconnect(redis));
    }
    const eventsQueue = new EventQueues(queues, config.queue);
    // The ingest worker's handler logs this connection's errors; here only so none goes unhandled.
    eventsQueue.on('error', (error) => log.debug({ err: error }, 'events queue connection error'));
    closers.unshift(() => eventsQueue.close());

    // Before ingest: its first pass makes the partitions ingest writes into.
    const retention = new RetentionLoop(sql, config, log.child({ component: 'retention' }), metrics, () =>
      catalog.current().entries.flatMap((e) => (e.source === 'file' ? [e.runtime.config] : [])),
    );
    await whileSlow(log, 'creating the event log partitions', retention.start());
    closers.unshift(() => retention.stop());
    const maintenance = new MaintenanceLoop(
      sql,
      Math.min(MAINTENANCE_EVERY_MS, config.retention.prune_every),
      log.child({ component: 'maintenance' }),
      consumedQueueSchemas(config),
    );
    await maintenance.start();
    closers.unshift(() => maintenance.stop());

    const ingestSql = connectIngest(config, stale.log);
    closers.unshift(() => ingestSql.end({ timeout: 5 }));
    const ingest: IngestWorker = startIngestWorker(
      config,
      ingestSql,
      log.child({ component: 'ingest' }),
      metrics,
      rollups,
    );
    closers.unshift(() => ingest.close(budget.leftMs()));

    // Also without rollups: the API or a reload may add some while it runs.
    const scheduling = config.scheduler.enabled;
    let schedulerStatus: (() => Record<string, unknown>) | undefined;
    let running: Scheduler | undefined;
    if (scheduling) {
      // The lease has its own small pool so renewals never wait behind evaluation queries.
      const leaseSql = connect(config.database_url, {
        max: 2,
        applicationName: 'coverage-rollup-lease',
        ...stale,
      });
      closers.push(() => leaseSql.end({ timeout: 5 }));
      // The former holder's sessions this instance ended after a takeover (former-holder.ts).
      const countEnded = ({ ended, refused }: EndedSessions) => {
        metrics.formerHolderSessionsEnded.inc({ result: 'ended' }, ended.length);
        metrics.formerHolderSessionsEnded.inc({ result: 'refused' }, refused.length);
      };
      const lease = new SchedulerLease({
        store: postgresLeaseStore(leaseSql),
        name: config.lease.name,
        ttlMs: config.lease.ttl,
        renewEveryMs: config.lease.renew_every,
        retryEveryMs: config.lease.retry_every,
        instanceId: INSTANCE_ID,
        log: log.child({ component: 'lease' }),
        onSessionsEnded: countEnded,
      });
      const lockWatch = new LockWatch({
        sql: leaseSql,
        application: sessionName(SESSION_PREFIX, INSTANCE_ID),
        instance: INSTANCE_ID,
        formerInstance: () => lease.formerInstance(),
        everyMs: Math.min(1000, config.lease.ttl / 4),
        timeoutMs: Math.min(config.lease.renew_every, config.lease.ttl / 3),
        log: log.child({ component: 'scheduler' }),
        metrics,
        onSessionsEnded: countEnded,
      });
      const scheduler = new Scheduler({
        sql,
        queues,
        queuePrefix: config.queue.prefix,
        catalog,
        fence: lease,
        log: log.child({ component: 'scheduler' }),
        metrics,
        dispatchConcurrency: config.scheduler.dispatch_concurrency,
        leaseTtlMs: config.lease.ttl,
        lockWatch,
        runChecks: {
          openMs: config.scheduler.run_check_every,
          // A finished Airflow run is asked about again (a clear reopens it) ten times less often.
          watchMs: Math.min(30_000, Math.max(1000, 10 * config.scheduler.run_check_every)),
        },
      });
      lease.onAcquired((token) => {
        metrics.leaseLeader.set(1);
        metrics.leaseToken.set(token);
        scheduler.kick();
      });
      lease.onLost(() => metrics.leaseLeader.set(0));
      await scheduler.start();
      running = scheduler;
      lease.start();
      // Stop evaluating first, then release the lease so a standby takes over at once. A pass
      // stuck on a lock must not keep the lease: once released, its commit would fail the fence.
      closers.unshift(async () => {
        const stopped = await within(scheduler.stop(), budget.schedulerMs());
        if (!stopped) log.warn('scheduler pass still running at shutdown; releasing the lease anyway');
        await lease.stop();
      });
      const reported = { renewals: 0, renewalFailures: 0, losses: 0 };
      schedulerStatus = () => {
        const status = lease.status();
        metrics.leaseExpirySeconds.set((status.expiresInMs ?? 0) / 1000);
        metrics.leaseRenewals.inc({ result: 'ok' }, status.renewals - reported.renewals);
        metrics.leaseRenewals.inc({ result: 'failed' }, status.renewalFailures - reported.renewalFailures);
        metrics.leaseLosses.inc(status.losses - reported.losses);
        Object.assign(reported, {
          renewals: status.renewals,
          renewalFailures: status.renewalFailures,
          losses: status.losses,
        });
        return { ...status, rollups: rollups().length };
      };
    }

    const replica = await startReadReplica(config, sql, log, metrics);
    if (replica) closers.push(...replica.closers);

    // POST /v1/events commits straight into the index where the queue is in its database: a pool
    // of its own, so a burst of producers never takes the scheduler's connections (closed after HTTP).
    const directSql = commitsDirectly(config)
      ? connect(config.database_url, {
          max: DIRECT_COMMIT_CONNECTIONS,
          applicationName: 'coverage-rollup-http-ingest',
          idleInTransactionTimeoutMs: config.queue.pg_stall_timeout,
          ...stale,
        })
      : undefined;
    if (directSql) closers.unshift(() => directSql.end({ timeout: 5 }));

    const http = buildServer(
      {
        config,
        sql,
        read: replica?.read ?? (() => ({ sql, asOf: null })),
        ...(replica ? { replicaStatus: replica.status } : {}),
        eventsQueue,
        ...(directSql ? { direct: directSql } : {}),
        queues,
        log,
        metrics,
        auth: new TokenAuth(config.api_tokens, config.read_tokens, options.localToken, {
          scoped,
          metricsPublic: config.metrics.public,
        }),
        now: Date.now,
        rollups,
        ...(schedulerStatus ? { schedulerStatus } : {}),
        retentionStatus: () => retention.status(),
        maintenanceStatus: () => maintenance.status(),
      },
      [
        registerRollupRoutes(catalog),
        registerCatalogRoutes(catalog),
        registerRepairRequest(catalog),
        registerGraphRoute(catalog),
        registerStatusPage(catalog),
      ],
    );
    // Other instances' changes: followed once this one serves them.
    await catalog.listen();
    const { host, port } = config.http;
    const url = await whileSlow(
      log,
      'opening the HTTP port',
      http.listen({ host, port }).catch((error: unknown) => {
        throw explainListenError(error, host, port);
      }),
    );
    closers.unshift(() => http.close());
    log.info({ url }, 'listening');

    return {
      sql,
      metrics,
      http,
      url,
      scheduler: running,
      stop: () => {
        budget.start();
        return closeAll(closers, log);
      },
    };
  } catch (error) {
    await closeAll(closers, log);
    throw error;
  }
}

/**
 * The read replica, when database_read_url is set: a pool of its own, read-only, never migrated,
 * and its lag probe. Closed after HTTP (closers run in order), so no request outlives the pool.
 */
async function startReadReplica(config: Config, sql: Sql, log: Logger, metrics: Metrics) {
  if (!config.database_read_url) return undefined;
  const replicaSql = connect(config.database_read_url, {
    max: 20,
    applicationName: 'coverage-rollup-read',
    readOnly: true,
  });
  metrics.useReplicaGauges();
  const replica = new ReadReplica({
    primary: sql,
    replica: replicaSql,
    maxLagMs: config.database_read_max_lag,
    log: log.child({ component: 'read-replica' }),
    onLag: (seconds, serving) => {
      metrics.replicaLagSeconds.set(seconds);
      metrics.replicaServingReads.set(serving ? 1 : 0);
    },
  });
  // A replica down at start is no reason to refuse to start: reads use the primary until it answers.
  await replica.start();
  return {
    read: (): ReadHandle => replica.read(),
    status: () => replica.status(),
    closers: [() => replica.stop(), () => replicaSql.end({ timeout: 5 })],
  };
}

/**
 * The assets config declares, and every rollup's output in that rollup's domain (unless declared):
 * an output is known, all gap, before its first run, and its domain is fixed by the rollup.
 */
function declaredAssets(config: Config, rollups: readonly RollupRuntime[]): DeclaredAsset[] {
  const named = new Set(config.assets.map((a) => a.name));
  const outputs = rollups.flatMap(({ rollup }) =>
    rollup.output === undefined || named.has(rollup.output)
      ? []
      : [{ name: rollup.output, domain: rollup.domain, zone: 'UTC' }],
  );
  return [...config.assets, ...outputs];
}
