import type { TargetConfig } from '../config/index.js';
import type { TriggerPayload } from '../core/trigger.js';
import type { QueueConnection } from '../queue/backend.js';
import { airflowAssetTarget } from './airflow/asset.js';
import { airflowTarget } from './airflow/dag-runs.js';
import { dagsterTarget } from './dagster/dagster.js';
import { queueTarget } from './queue.js';
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
  type Observation,
  type ObservedRun,
  type Target,
} from './target.js';
import { webhookTarget } from './webhook.js';

export type { DeliveryResult, Target } from './target.js';

/**
 * Targets by their stored configuration: a decision is delivered where its rollup pointed when it
 * was decided, even if the config changed since. Its secrets are filled in at each delivery from
 * the environment and the live config (`live`: every configured rollup's target); nothing secret
 * is read from the database. Built once per distinct resolved configuration.
 */
export class Targets {
  private readonly cache = new Map<string, Target>();

  constructor(
    private readonly queues: QueueConnection,
    private readonly defaultPrefix: string,
    private readonly live: readonly TargetConfig[],
    private readonly env: NodeJS.ProcessEnv = process.env,
    /** Told the id of a queue job that finished (a wake-up; see queue.ts). */
    private readonly onFinished?: (runId: string) => void,
  ) {}

  /** Delivers to the stored target; a secret that cannot be resolved is a retried failure. */
  async deliver(stored: StoredTarget, payload: TriggerPayload): Promise<DeliveryResult> {
    let resolved: ResolvedTarget;
    try {
      resolved = resolveTarget(stored, this.live, this.env);
    } catch (error) {
      if (error instanceof SecretUnavailableError) return { ok: false, retry: true, error: error.message };
      throw error;
    }
    const target = this.get(resolved);
    if ('unusable' in target) return { ok: false, retry: false, error: target.unusable };
    const result = await target.deliver(payload);
    return result.ok ? result : { ...result, error: scrubSecrets(result.error, secretValues(resolved)) };
  }

  /**
   * Asks the stored target about delivered runs (at most 100); null for a target that cannot be
   * asked (a webhook reports through the callback) or whose secrets are missing now.
   */
  async observe(
    stored: StoredTarget,
    runs: readonly ObservedRun[],
  ): Promise<Observation | { error: string } | null> {
    let resolved: ResolvedTarget;
    try {
      resolved = resolveTarget(stored, this.live, this.env);
    } catch (error) {
      if (error instanceof SecretUnavailableError) return { error: error.message };
      throw error;
    }
    const target = this.get(resolved);
    if ('unusable' in target) return { error: target.unusable };
    if (!target.observe) return null;
    const answer = await target.observe(runs);
    return 'error' in answer
      ? { error: scrubSecrets(answer.error as string, secretValues(resolved)) }
      : answer;
  }

  private get(config: ResolvedTarget): Target | { unusable: string } {
    return cachedTarget(this.cache, config, () =>
      build(config, this.queues, this.defaultPrefix, this.onFinished),
    );
  }

  async close(): Promise<void> {
    await Promise.all([...this.cache.values()].map((t) => t.close()));
    this.cache.clear();
  }
}

function build(
  config: ResolvedTarget,
  queues: QueueConnection,
  defaultPrefix: string,
  onFinished: ((runId: string) => void) | undefined,
): Target {
  switch (config.type) {
    case 'queue':
      return queueTarget(queues, config.queue, config.prefix ?? defaultPrefix, config.timeout, onFinished);
    case 'webhook':
      return webhookTarget(config);
    case 'airflow':
      return airflowTarget(config);
    case 'dagster':
      return dagsterTarget(config);
    case 'airflow_asset':
      return airflowAssetTarget(config);
  }
}
