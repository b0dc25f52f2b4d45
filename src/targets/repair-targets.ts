/**
 * Where repair requests go: the same target types and configuration as triggers, with
 * the repair payload. Each attempt is delivered at least once under its own idempotency key
 * (`repair-<id>~aN`), which the target dedupes: the BullMQ jobId, the webhook's Idempotency-Key,
 * the Airflow dag_run_id, the Airflow asset event or Dagster observation found by the key it
 * carries. Secrets are resolved at delivery, as for triggers (targets/secrets.ts).
 */
import type { TargetConfig } from '../config/index.js';
import type { RepairPayload } from '../core/repair-payload.js';
import type { QueueConnection } from '../queue/backend.js';
import { type AirflowAssetConfig, airflowAssetEvents } from './airflow-asset-events.js';
import { airflowAuth } from './airflow-token.js';
import { dagsterRepairTarget } from './dagster-repair.js';
import { QUEUE_DELIVERY_TIMEOUT_MS } from './queue.js';
import {
  type ResolvedTarget,
  resolveTarget,
  SecretUnavailableError,
  type StoredTarget,
  scrubSecrets,
  secretValues,
} from './secrets.js';
import {
  cachedTarget,
  type DeliveryResult,
  getJson,
  postJson,
  resultOfStatus,
  withinTime,
} from './target.js';

/** The BullMQ job name of a repair request on a queue target. */
export const REPAIR_JOB_NAME = 'repair';

interface RepairTarget {
  deliver(payload: RepairPayload): Promise<DeliveryResult>;
  close(): Promise<void>;
}

export class RepairTargets {
  private readonly cache = new Map<string, RepairTarget>();

  constructor(
    private readonly queues: QueueConnection,
    private readonly defaultPrefix: string,
    private readonly live: readonly TargetConfig[],
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  async deliver(stored: StoredTarget, payload: RepairPayload): Promise<DeliveryResult> {
    let resolved: ResolvedTarget;
    try {
      resolved = resolveTarget(stored, this.live, this.env);
    } catch (error) {
      if (error instanceof SecretUnavailableError) return { ok: false, retry: true, error: error.message };
      throw error;
    }
    const target = cachedTarget(this.cache, resolved, () => this.build(resolved));
    if ('unusable' in target) return { ok: false, retry: false, error: target.unusable };
    const result = await target.deliver(payload);
    return result.ok ? result : { ...result, error: scrubSecrets(result.error, secretValues(resolved)) };
  }

  private build(config: ResolvedTarget): RepairTarget {
    switch (config.type) {
      case 'queue':
        return queueRepairTarget(
          this.queues,
          config.queue,
          config.prefix ?? this.defaultPrefix,
          config.timeout ?? QUEUE_DELIVERY_TIMEOUT_MS,
        );
      case 'webhook':
        return {
          async deliver(payload) {
            const headers = { ...config.headers, 'Idempotency-Key': payload.idempotency_key };
            const response = await postJson(config.url, payload, headers, config.timeout);
            if ('error' in response) return { ok: false, retry: true, error: response.error };
            return resultOfStatus(response.status, response.text);
          },
          close: async () => {},
        };
      case 'airflow':
        return airflowRepairTarget(config);
      case 'airflow_asset':
        return airflowAssetRepairTarget(config);
      case 'dagster':
        return dagsterRepairTarget(config);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.cache.values()].map((t) => t.close()));
    this.cache.clear();
  }
}

function queueRepairTarget(
  queues: QueueConnection,
  name: string,
  prefix: string,
  timeoutMs: number,
): RepairTarget {
  const queue = queues.queue(name, prefix);
  return {
    async deliver(payload) {
      const added = queue.add(REPAIR_JOB_NAME, payload, { jobId: payload.idempotency_key });
      try {
        await withinTime(added, timeoutMs, `no answer from the queue within ${timeoutMs} ms`);
        return { ok: true };
      } catch (error) {
        return { ok: false, retry: true, error: (error as Error).message };
      }
    },
    close: () => queue.close(),
  };
}

/** Airflow run ids allow letters, digits and `_.~+-`: the key maps onto them as it is. */
export function repairDagRunId(payload: RepairPayload): string {
  return `coverage_rollup__${payload.idempotency_key}`;
}

/**
 * A DAG run of the producer's backfill DAG with the request in `conf`. No logical date: a repair
 * is not a data interval of the DAG's schedule, and Airflow keeps (dag_id, logical_date) unique.
 * A redelivery is a 409, done once the run with our id is found.
 */
function airflowRepairTarget(config: Extract<ResolvedTarget, { type: 'airflow' }>): RepairTarget {
  const base = config.url.replace(/\/+$/, '');
  const endpoint = `${base}/api/v2/dags/${encodeURIComponent(config.dag_id)}/dagRuns`;
  const authorized = airflowAuth(config, Date.now);
  return {
    async deliver(payload) {
      const used: string[] = [];
      const runId = repairDagRunId(payload);
      const body = {
        dag_run_id: runId,
        logical_date: null,
        conf: payload,
        note: `coverage-rollup repair of ${payload.asset}, attempt ${payload.attempt}`,
      };
      const headers = { 'Idempotency-Key': payload.idempotency_key };
      const sent = await authorized(used, (auth) =>
        postJson(endpoint, body, { ...auth, ...headers }, config.timeout),
      );
      let result: DeliveryResult;
      if ('error' in sent) result = { ok: false, retry: true, error: sent.error };
      else if (sent.status === 409) {
        const found = await authorized(used, (auth) =>
          getJson(`${endpoint}/${encodeURIComponent(runId)}`, auth, config.timeout),
        );
        result =
          'error' in found
            ? { ok: false, retry: true, error: found.error }
            : resultOfStatus(found.status, found.text);
      } else result = resultOfStatus(sent.status, sent.text);
      return result.ok ? result : { ...result, error: scrubSecrets(result.error, used) };
    },
    close: async () => {},
  };
}

/**
 * An asset event with the request in `extra` and no partition key: a request names ranges of an
 * upstream, not a partition of the asset, so a backfill DAG scheduled on the asset (a plain
 * `schedule=[Asset(...)]`) runs on it and reads it from `triggering_asset_events`. A redelivery
 * finds the attempt's event by `extra.idempotency_key` and posts no second one.
 */
function airflowAssetRepairTarget(config: AirflowAssetConfig): RepairTarget {
  const events = airflowAssetEvents(config);
  return {
    async deliver(payload) {
      const used: string[] = [];
      const result = await events.sendOnce(
        {
          extra: payload,
          isOurs: (extra) => extra?.idempotency_key === payload.idempotency_key,
          since: payload.requested_at,
        },
        used,
      );
      return result.ok ? result : { ...result, error: scrubSecrets(result.error, used) };
    },
    close: async () => {},
  };
}
