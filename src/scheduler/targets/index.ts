import type { Redis } from 'ioredis';
import type { TargetConfig } from '../../config.js';
import { airflowTarget } from './airflow.js';
import { queueTarget } from './queue.js';
import type { Target } from './target.js';
import { webhookTarget } from './webhook.js';

export type { DeliveryResult, Target } from './target.js';

/**
 * Targets by their stored configuration: a decision is delivered where its rollup pointed when it
 * was decided, even if the config changed since. Built once per distinct configuration.
 */
export class Targets {
  private readonly cache = new Map<string, Target>();

  constructor(
    private readonly redis: Redis,
    private readonly defaultPrefix: string,
  ) {}

  get(config: TargetConfig): Target {
    const key = JSON.stringify(config);
    let target = this.cache.get(key);
    if (!target) {
      target = build(config, this.redis, this.defaultPrefix);
      this.cache.set(key, target);
    }
    return target;
  }

  async close(): Promise<void> {
    await Promise.all([...this.cache.values()].map((t) => t.close()));
    this.cache.clear();
  }
}

function build(config: TargetConfig, redis: Redis, defaultPrefix: string): Target {
  switch (config.type) {
    case 'queue':
      return queueTarget(redis, config.queue, config.prefix ?? defaultPrefix);
    case 'webhook':
      return webhookTarget(config);
    case 'airflow':
      return airflowTarget(config);
  }
}
