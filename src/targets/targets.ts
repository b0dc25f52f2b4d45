/**
 * Delivery to stored targets, of any registered type (registry.ts): a decision, or a repair request
 * attempt, goes where its rollup pointed when it was made, even if the config changed since.
 */
import type { RepairPayload } from '../core/repairs/repair-payload.js';
import type { TriggerPayload } from '../core/runs/trigger.js';
import { type TargetConfig, targetType } from './registry.js';
import { scrubSecrets } from './requests.js';
import {
  type ResolvedTarget,
  resolveTarget,
  SecretUnavailableError,
  type StoredTarget,
  secretValues,
} from './secrets.js';
import type {
  DeliveryContext,
  DeliveryResult,
  JobQueues,
  Observation,
  ObservedRun,
  RepairTarget,
  Target,
  TargetDeps,
  TargetType,
} from './target.js';

export type { DeliveryResult, Target } from './target.js';

/**
 * Targets by their stored configuration, for triggers and for repair requests alike. Secrets are
 * filled in at each delivery from the environment and the live config (`live`: every configured
 * rollup's target and repair target); nothing secret is read from the database. A type's target
 * is built once per distinct resolved configuration, apart for triggers and for repairs.
 */
export class Targets {
  private readonly triggers = new Map<string, Target>();
  private readonly repairs = new Map<string, RepairTarget>();
  private readonly deps: TargetDeps;

  constructor(
    queues: JobQueues,
    defaultPrefix: string,
    private live: readonly TargetConfig[],
    private readonly env: NodeJS.ProcessEnv = process.env,
    /** Told the id of a queue job that finished (a wake-up; see queue.ts). */
    onFinished?: (runId: string) => void,
  ) {
    this.deps = { queues, defaultPrefix, onFinished };
  }

  /** The rollups changed: these are the configured targets (literal secrets are found here) from now on. */
  setLive(live: readonly TargetConfig[]): void {
    this.live = live;
  }

  /** Delivers a decision to the stored target; a secret that cannot be resolved is a retried failure. */
  async deliver(
    stored: StoredTarget,
    payload: TriggerPayload,
    context?: DeliveryContext,
  ): Promise<DeliveryResult> {
    const build = (type: TargetType, config: ResolvedTarget) => type.trigger(config, this.deps);
    return this.send(stored, this.triggers, build, (target) => target.deliver(payload, context));
  }

  /** Delivers a repair request attempt to the stored target, as `deliver` does a decision. */
  async deliverRepair(stored: StoredTarget, payload: RepairPayload): Promise<DeliveryResult> {
    const build = (type: TargetType, config: ResolvedTarget) => type.repair(config, this.deps);
    return this.send(stored, this.repairs, build, (target) => target.deliver(payload));
  }

  /**
   * Asks the stored target about delivered runs (at most 100); null for a target that cannot be
   * asked (its type has nothing to follow) or whose secrets are missing now.
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
    const target = built(this.triggers, resolved, (type, config) => type.trigger(config, this.deps));
    if ('unusable' in target) return { error: target.unusable };
    if (!target.observe) return null;
    const answer = await target.observe(runs);
    return 'error' in answer
      ? { error: scrubSecrets(answer.error as string, secretValues(resolved)) }
      : answer;
  }

  private async send<T extends object>(
    stored: StoredTarget,
    cache: Map<string, T>,
    build: (type: TargetType, config: ResolvedTarget) => T,
    deliver: (target: T) => Promise<DeliveryResult>,
  ): Promise<DeliveryResult> {
    let resolved: ResolvedTarget;
    try {
      resolved = resolveTarget(stored, this.live, this.env);
    } catch (error) {
      if (error instanceof SecretUnavailableError) return { ok: false, retry: true, error: error.message };
      throw error;
    }
    const target = built(cache, resolved, build);
    if ('unusable' in target) return { ok: false, retry: false, error: target.unusable };
    const result = await deliver(target);
    return result.ok ? result : { ...result, error: scrubSecrets(result.error, secretValues(resolved)) };
  }

  async close(): Promise<void> {
    await Promise.all([...this.triggers.values(), ...this.repairs.values()].map((t) => t.close()));
    this.triggers.clear();
    this.repairs.clear();
  }
}

/**
 * The target for `config` from `cache`, built once; or why it cannot be built (BullMQ refuses a
 * queue name with `:` when the queue is made). That fails the deliveries to it alone, with the
 * reason, where a throw would fail every scheduler pass, and keep failing them while the stored
 * decision or request stays.
 */
function built<T extends object>(
  cache: Map<string, T>,
  config: ResolvedTarget,
  build: (type: TargetType, config: ResolvedTarget) => T,
): T | { unusable: string } {
  const key = JSON.stringify(config);
  let target = cache.get(key);
  if (target === undefined) {
    const type = targetType(config.type);
    if (type === undefined) return { unusable: `no target type ${config.type} is known to this version` };
    try {
      target = build(type, config);
    } catch (error) {
      return { unusable: `this ${config.type} target cannot be used: ${(error as Error).message}` };
    }
    cache.set(key, target);
  }
  return target;
}
